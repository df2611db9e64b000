// open() over HTTP against real servers on 127.0.0.1 (node:http): one that serves Range requests, one that
// ignores Range and answers 200, and faulty ones. The servers count requests and the body bytes they
// send, so these tests check what the reader asks for, not only what it returns. Every faulty server
// must give either correct data or a SafetensorsError 'Io' ('Aborted' when aborted), never wrong data.
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { open, SafetensorsError } from '../src/node.ts';
import { FIXTURES_REAL, realFixtures } from './helpers.ts';
import { ignoreRangeHandler, parseRange, rangeHandler, send, startServer, type Handler, type TestServer } from './http-server.ts';
import { buildFile, bytesOf, errorOf, expectError, expectSameBytes, headerOf, rng } from './read-helpers.ts';

const LORA_NAME = 'catundchat__stable-diffusion-v1.5-lora__pytorch_lora_weights.safetensors';
const FLUX_NAME = 'fluxml__safetensors.jl__model.safetensors';
const read = (f: string) => new Uint8Array(readFileSync(FIXTURES_REAL + f));
const LORA = read(LORA_NAME);
const FLUX = read(FLUX_NAME);
const loraHeader = headerOf(LORA);
const fluxHeader = headerOf(FLUX);

/** Tensors of a header in data order. */
function inDataOrder(h: ReturnType<typeof headerOf>) {
  return Object.entries(h.tensors)
    .map(([name, t]) => ({ name, ...t, begin: t.data_offsets[0], end: t.data_offsets[1] }))
    .sort((a, b) => a.begin - b.begin || a.end - b.end);
}
const loraTensors = inDataOrder(loraHeader);
const fluxTensors = inDataOrder(fluxHeader);
const LAST_LORA = loraTensors[loraTensors.length - 1];

/** The file bytes of a tensor (straight from the file, not through the library). */
function tensorBytes(file: Uint8Array, name: string): Uint8Array {
  const h = headerOf(file);
  const [b, e] = h.tensors[name].data_offsets;
  return file.subarray(h.dataStart + b, h.dataStart + e);
}

// A 64 MiB file for the server that ignores Range: a small tensor first, a big one, a small one last.
const SMALL = new Float32Array([1.5, -2.25, 3.125, 0, -0, 1e-30, 65504, -7]);
const LAST = new Float32Array([42, -42, 0.5, 0.25]);
const BIG_DATA = 64 * 1024 * 1024;
const BIG = buildFile([
  { name: 'small', dtype: 'F32', shape: [8], bytes: bytesOf(SMALL) },
  { name: 'big', dtype: 'U8', shape: [BIG_DATA], bytes: new Uint8Array(BIG_DATA).fill(7) },
  { name: 'last', dtype: 'F32', shape: [4], bytes: bytesOf(LAST) },
]);
// A zero-sized tensor at the very end of the data: reading it must not need a Range request past the end.
const ZERO = buildFile([
  { name: 'a', dtype: 'I16', shape: [3], bytes: bytesOf(new Int16Array([1, -2, 3])) },
  { name: 'empty', dtype: 'F32', shape: [0, 4], bytes: new Uint8Array(0) },
]);

const files: Record<string, Uint8Array> = {
  [LORA_NAME]: LORA,
  [FLUX_NAME]: FLUX,
  'big.safetensors': BIG,
  'zero.safetensors': ZERO,
};
for (const f of realFixtures().valid) files[f] = read(f);
const lookup = (path: string) => files[path.replace(/^\/(auth\/)?/, '')];

let ranged: TestServer;
let ignoring: TestServer;
let faulty: TestServer;

// Faulty servers. Path: /MODE/FROM/KEY/FILE. Requests number 0, 1, ... per KEY; those before FROM are
// served correctly, the rest with the fault. Each test uses its own KEY.
const counters = new Map<string, number>();
let keys = 0;
const key = () => `k${++keys}`;
function faultUrl(mode: string, from: number, file = LORA_NAME): string {
  return `${faulty.origin}/${mode}/${from}/${key()}/${file}`;
}

const waitForClose = (res: import('node:http').ServerResponse) => new Promise<void>((resolve) => res.on('close', () => resolve()));
const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

const faultyHandler: Handler = async (req, res, log) => {
  const m = /^\/([a-z0-9-]+)\/(\d+)\/([^/]+)\/(.+)$/.exec(log.path);
  if (!m) throw new Error(`bad test path ${log.path}`);
  const [, mode, from, k, name] = m;
  const n = counters.get(k) ?? 0;
  counters.set(k, n + 1);
  const body = files[name];
  if (n < Number(from)) return rangeHandler(() => body)(req, res, log);
  const size = body.length;
  const r = parseRange(req.headers.range, size);
  const { start, end } = typeof r === 'object' ? r : { start: 0, end: size - 1 };
  const part = body.subarray(start, end + 1);
  const cr = (s: number, e: number, total = size) => `bytes ${s}-${e}/${total}`;
  const ok = { ETag: '"v1"', 'Accept-Ranges': 'bytes' };
  switch (mode) {
    case 'drop': // the connection is destroyed mid-body
      res.writeHead(206, { ...ok, 'Content-Range': cr(start, end), 'Content-Length': part.length });
      send(res, log, part.subarray(0, part.length >> 1));
      await tick();
      res.socket?.destroy();
      return;
    case 'short-content-length': // fewer bytes than Content-Length, then a clean close
      res.writeHead(206, { ...ok, 'Content-Range': cr(start, end), 'Content-Length': part.length });
      send(res, log, part.subarray(0, part.length >> 1));
      await tick();
      res.socket?.end();
      return;
    case 'short-content-range': // a complete response whose body is shorter than its Content-Range
      res.writeHead(206, { ...ok, 'Content-Range': cr(start, end), 'Content-Length': part.length >> 1 });
      send(res, log, part.subarray(0, part.length >> 1));
      res.end();
      return;
    case 'later-start': { // Content-Range (and bytes) start one byte later than asked
      const s = start + 1;
      const e = Math.min(end + 1, size - 1);
      res.writeHead(206, { ...ok, 'Content-Range': cr(s, e), 'Content-Length': e - s + 1 });
      send(res, log, body.subarray(s, e + 1));
      res.end();
      return;
    }
    case 'earlier-start': { // Content-Range (and bytes) start one byte earlier than asked
      const s = Math.max(0, start - 1);
      res.writeHead(206, { ...ok, 'Content-Range': cr(s, end), 'Content-Length': end - s + 1 });
      send(res, log, body.subarray(s, end + 1));
      res.end();
      return;
    }
    case 'other-total': // the right bytes, but the total says the file is now longer
      res.writeHead(206, { ...ok, 'Content-Range': cr(start, end, size + 1000), 'Content-Length': part.length });
      send(res, log, part);
      res.end();
      return;
    case 'extra-bytes': // the right Content-Range, but 16 more body bytes than it says
      res.writeHead(206, { ...ok, 'Content-Range': cr(start, end), 'Content-Length': part.length + 16 });
      send(res, log, part);
      send(res, log, new Uint8Array(16).fill(0xee));
      res.end();
      return;
    case 'etag-change': // every request gets a new ETag; the bytes are right
      res.writeHead(206, { ETag: `"changed-${n}"`, 'Content-Range': cr(start, end), 'Content-Length': part.length });
      send(res, log, part);
      res.end();
      return;
    case 'status-500':
    case 'status-404':
    case 'status-401': {
      const status = Number(mode.slice(7));
      res.writeHead(status, { 'Content-Type': 'text/plain' });
      res.end(`error ${status}`);
      return;
    }
    case 'ok-no-range-header': // 206 without Content-Range
      res.writeHead(206, { ...ok, 'Content-Length': part.length });
      send(res, log, part);
      res.end();
      return;
    case 'hang-before-headers':
      await waitForClose(res);
      return;
    case 'hang-mid-body':
      res.writeHead(206, { ...ok, 'Content-Range': cr(start, end), 'Content-Length': part.length });
      send(res, log, part.subarray(0, part.length >> 1));
      await waitForClose(res);
      return;
    case 'gzip-200': { // ignores Range and compresses: its Content-Length is not the file's size
      const gzipped = gzipSync(body);
      res.writeHead(200, { ETag: '"v1"', 'Content-Encoding': 'gzip', 'Content-Length': gzipped.length });
      send(res, log, gzipped);
      res.end();
      return;
    }
    case 'chunked-200': // ignores Range, and sends no Content-Length (chunked)
      res.writeHead(200, { ETag: '"v1"' });
      send(res, log, body);
      res.end();
      return;
    default:
      throw new Error(`unknown mode ${mode}`);
  }
};

beforeAll(async () => {
  ranged = await startServer((req, res, log) => {
    if (log.path.startsWith('/auth/') && req.headers.authorization !== 'Bearer s3cret') {
      res.writeHead(401, { 'WWW-Authenticate': 'Bearer' });
      res.end('unauthorized');
      return;
    }
    return rangeHandler(lookup)(req, res, log);
  });
  ignoring = await startServer(ignoreRangeHandler(lookup));
  faulty = await startServer(faultyHandler);
});

afterAll(async () => {
  await Promise.all([ranged?.close(), ignoring?.close(), faulty?.close()]);
});

beforeEach(() => {
  ranged.clear();
  ignoring.clear();
  faulty.clear();
});

/** Exact bytes of a tensor's data. */
const dataBytes = (t: { data: ArrayBufferView }) => bytesOf(t.data);

describe('a server that serves Range requests', () => {
  test("a real fixture's 38 KB header (256 tensors) arrives in one request", async () => {
    expect(loraHeader.dataStart).toBeGreaterThan(38_000);
    const file = await open(`${ranged.origin}/${LORA_NAME}`);
    expect(ranged.log.length).toBe(1);
    expect(ranged.log[0].range).toMatch(/^bytes=0-\d+$/);
    expect(file.names().length).toBe(256);
    expect(file.header.fileSize).toBe(LORA.length);
    expect(file.metadata).toEqual({ format: 'pt' });
  });

  test.each(realFixtures().valid)('%s: open() makes exactly one request', async (f) => {
    const file = await open(`${ranged.origin}/${f}`);
    expect(ranged.log.length).toBe(1);
    expect(file.header.fileSize).toBe(files[f].length);
  });

  test('getTensor reads exactly its bytes, in one request, for every tensor of the 256-tensor file', async () => {
    const file = await open(new URL(`${ranged.origin}/${LORA_NAME}`));
    for (const t of loraTensors) {
      ranged.clear();
      const tensor = await file.getTensor(t.name);
      expect(ranged.log.length, t.name).toBe(1);
      const a = loraHeader.dataStart + t.begin;
      expect(ranged.log[0].range, t.name).toBe(`bytes=${a}-${a + t.end - t.begin - 1}`);
      expect(ranged.bytesSent(), t.name).toBe(t.end - t.begin);
      expectSameBytes(dataBytes(tensor), tensorBytes(LORA, t.name), t.name);
      expect(tensor.shape).toEqual(t.shape);
    }
  });

  test('a row slice of a 2-D tensor reads only those rows', async () => {
    const t = loraTensors.find((x) => x.shape.length === 2 && x.shape[0] === 4 && x.shape[1] === 1280)!;
    expect(t).toBeDefined();
    const rowBytes = 1280 * 4;
    const file = await open(`${ranged.origin}/${LORA_NAME}`);
    const all = tensorBytes(LORA, t.name);

    ranged.clear();
    const rows = await file.getSlice(t.name, [[1, 3]]);
    expect(rows.shape).toEqual([2, 1280]);
    expect(ranged.bytesSent()).toBe(2 * rowBytes);
    expect(ranged.log.length).toBe(1); // two adjacent rows are one run
    expectSameBytes(dataBytes(rows), all.subarray(rowBytes, 3 * rowBytes));

    ranged.clear();
    const row = await file.getSlice(t.name, [3, null]);
    expect(row.shape).toEqual([1280]);
    expect(ranged.bytesSent()).toBe(rowBytes);
    expectSameBytes(dataBytes(row), all.subarray(3 * rowBytes));

    // A [1280, 4] tensor: 64 rows of 16 bytes.
    const up = loraTensors.find((x) => x.shape.length === 2 && x.shape[0] === 1280 && x.shape[1] === 4)!;
    ranged.clear();
    const block = await file.getSlice(up.name, [[100, 164]]);
    expect(block.shape).toEqual([64, 4]);
    expect(ranged.bytesSent()).toBe(64 * 16);
    expectSameBytes(dataBytes(block), tensorBytes(LORA, up.name).subarray(100 * 16, 164 * 16));
  });

  test('a column slice reads only the columns (4 runs of 8 bytes), not the rows between them', async () => {
    const t = loraTensors.find((x) => x.shape.length === 2 && x.shape[0] === 4 && x.shape[1] === 1280)!;
    const file = await open(`${ranged.origin}/${LORA_NAME}`);
    ranged.clear();
    const cols = await file.getSlice(t.name, [null, [10, 12]]);
    expect(cols.shape).toEqual([4, 2]);
    expect(ranged.bytesSent()).toBe(4 * 2 * 4);
    expect(ranged.log.length).toBeLessThanOrEqual(4);
    const all = new Float32Array(tensorBytes(LORA, t.name).slice().buffer);
    const want = [0, 1, 2, 3].flatMap((r) => [all[r * 1280 + 10], all[r * 1280 + 11]]);
    expect(Array.from(cols.data as Float32Array)).toEqual(want);
  });

  test('the runs of a column slice are requested several at a time, and a failed run stops the rest', async () => {
    const t = loraTensors.find((x) => x.shape.length === 2 && x.shape[0] >= 64)!;
    const [rows, columns] = t.shape;
    // A server that holds every data request for a moment, so overlapping requests show.
    let inFlight = 0;
    let most = 0;
    let failAfter = Infinity;
    const slow = await startServer(async (req, res, log) => {
      const data = !(req.headers.range ?? '').startsWith('bytes=0-');
      if (data && --failAfter < 0) return void res.destroy();
      inFlight++;
      most = Math.max(most, inFlight);
      if (data) await new Promise((resolve) => setTimeout(resolve, 20));
      inFlight--;
      return rangeHandler(lookup)(req, res, log);
    });
    try {
      const file = await open(`${slow.origin}/${LORA_NAME}`);
      const column = await file.getSlice(t.name, [null, [0, 1]]);
      const all = new Float32Array(tensorBytes(LORA, t.name).slice().buffer);
      expect(Array.from(column.data as Float32Array)).toEqual(Array.from({ length: rows }, (_, r) => all[r * columns]));
      expect(most).toBeGreaterThan(1);
      expect(most).toBeLessThanOrEqual(8);
      slow.clear();
      failAfter = 3;
      const error = await file.getSlice(t.name, [null, [0, 1]]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SafetensorsError);
      expect((error as SafetensorsError).code).toBe('Io');
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(slow.log.length, 'requests after the failure').toBeLessThan(rows);
    } finally {
      await slow.close();
    }
  });

  test('tensors() reads the data section once: bytes sent equal the sum of the tensor sizes', async () => {
    const file = await open(`${ranged.origin}/${LORA_NAME}`);
    ranged.clear();
    const names: string[] = [];
    for await (const t of file.tensors()) {
      names.push(t.name);
      expectSameBytes(dataBytes(t), tensorBytes(LORA, t.name), t.name);
    }
    expect(names).toEqual(loraTensors.map((t) => t.name));
    expect(ranged.bytesSent()).toBe(LORA.length - loraHeader.dataStart);
  });

  test('every tensor of a file with 12 dtypes is read right, raw and as F32 through the same bytes', async () => {
    const file = await open(`${ranged.origin}/${FLUX_NAME}`);
    for (const t of fluxTensors) {
      const tensor = await file.getTensor(t.name);
      expect(tensor.dtype).toBe(t.dtype);
      expectSameBytes(dataBytes(tensor), tensorBytes(FLUX, t.name), t.name);
    }
    const bf = await file.getTensor('bfloat16_3', { dtype: 'F32' });
    const bits = new Uint16Array(tensorBytes(FLUX, 'bfloat16_3').slice().buffer);
    expect(Array.from(bf.data as Float32Array)).toEqual(Array.from(bits, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]));
  });

  test('a zero-sized tensor at the end of the file reads as empty, with no bytes sent', async () => {
    const file = await open(`${ranged.origin}/zero.safetensors`);
    ranged.clear();
    const empty = await file.getTensor('empty');
    expect(empty.shape).toEqual([0, 4]);
    expect(empty.data).toBeInstanceOf(Float32Array);
    expect(empty.data.length).toBe(0);
    expect(ranged.bytesSent()).toBe(0);
    expect(Array.from((await file.getTensor('a')).data as Int16Array)).toEqual([1, -2, 3]);
  });

  test('custom headers reach the server on every request', async () => {
    await expectError(() => open(`${ranged.origin}/auth/${FLUX_NAME}`), 'Io');
    ranged.clear();
    const file = await open(`${ranged.origin}/auth/${FLUX_NAME}`, { headers: { Authorization: 'Bearer s3cret', 'X-Test': 'yes' } });
    await file.getTensor('float32_35');
    await file.getSlice('int64_357', [1]);
    expect(ranged.log.length).toBe(3);
    for (const entry of ranged.log) {
      expect(entry.headers.authorization).toBe('Bearer s3cret');
      expect(entry.headers['x-test']).toBe('yes');
      expect(entry.status).toBe(206);
    }
    const h = new Headers({ Authorization: 'Bearer s3cret' });
    const again = await open(`${ranged.origin}/auth/${FLUX_NAME}`, { headers: h });
    expectSameBytes(dataBytes(await again.getTensor('int8_35')), tensorBytes(FLUX, 'int8_35'));
  });

  test('a custom fetch is used for every request', async () => {
    const calls: string[] = [];
    const myFetch: typeof fetch = (input, init) => {
      calls.push(String(input instanceof Request ? input.url : input));
      return fetch(input, init);
    };
    const file = await open(`${ranged.origin}/${FLUX_NAME}`, { fetch: myFetch });
    await file.getTensor('float64_357');
    expect(calls.length).toBe(ranged.log.length);
    expect(calls.length).toBeGreaterThanOrEqual(2);
    for (const c of calls) expect(c).toBe(`${ranged.origin}/${FLUX_NAME}`);
  });

  test('a custom fetch with no server behind it at all is enough', async () => {
    const requests: string[] = [];
    const fakeFetch = (async (_input: RequestInfo | URL, init?: RequestInit) => {
      const range = new Headers(init?.headers).get('Range') ?? '';
      requests.push(range);
      const r = parseRange(range, FLUX.length);
      if (typeof r !== 'object') return new Response(FLUX.slice(), { status: 200, headers: { 'Content-Length': String(FLUX.length) } });
      return new Response(FLUX.slice(r.start, r.end + 1), {
        status: 206,
        headers: { 'Content-Range': `bytes ${r.start}-${r.end}/${FLUX.length}`, 'Content-Length': String(r.end - r.start + 1) },
      });
    }) as typeof fetch;
    // Port 9 (discard) on 127.0.0.1: the global fetch would fail here.
    const file = await open('http://127.0.0.1:9/model.safetensors', { fetch: fakeFetch });
    expectSameBytes(dataBytes(await file.getTensor('uint8_357')), tensorBytes(FLUX, 'uint8_357'));
    expect(requests.length).toBeGreaterThanOrEqual(2);
  });

  test('a connection refused is an Io error', async () => {
    const gone = await startServer(() => undefined);
    const url = `${gone.origin}/x.safetensors`;
    await gone.close();
    await expectError(() => open(url), 'Io');
  });
});

describe('a server that ignores Range and answers 200 with the whole body', () => {
  test('every tensor of a real fixture is still read correctly', async () => {
    const file = await open(`${ignoring.origin}/${FLUX_NAME}`);
    expect(file.names().length).toBe(36);
    for (const t of fluxTensors) {
      const tensor = await file.getTensor(t.name);
      expectSameBytes(dataBytes(tensor), tensorBytes(FLUX, t.name), t.name);
    }
    const slice = await file.getSlice('float32_357', [[1, 2], null, [2, 4]]);
    const all = new Float32Array(tensorBytes(FLUX, 'float32_357').slice().buffer);
    const want: number[] = [];
    for (let j = 0; j < 5; j++) for (let k = 2; k < 4; k++) want.push(all[35 + j * 7 + k]);
    expect(slice.shape).toEqual([1, 5, 2]);
    expect(Array.from(slice.data as Float32Array)).toEqual(want);
    expect(ignoring.log.every((e) => e.status === 200)).toBe(true);
  });

  test('a 64 MiB file: the header and a small tensor are read without the server sending the whole file', async () => {
    const file = await open(`${ignoring.origin}/big.safetensors`);
    expect(file.header.fileSize).toBe(BIG.length);
    expect(ignoring.log.length).toBe(1);
    expect(ignoring.log[0].bytesSent).toBeLessThan(BIG.length / 2);
    ignoring.clear();
    const small = await file.getTensor('small');
    expect(Array.from(small.data as Float32Array)).toEqual(Array.from(SMALL));
    expect(ignoring.bytesSent()).toBeLessThan(BIG.length / 2);
    // The last tensor needs the whole stream; it must still come out right.
    const last = await file.getTensor('last');
    expect(Array.from(last.data as Float32Array)).toEqual(Array.from(LAST));
  });

  test('a 200 without Content-Length (chunked) gives correct data or an Io error', async () => {
    let result: Uint8Array | undefined;
    try {
      const file = await open(faultUrl('chunked-200', 0, FLUX_NAME));
      result = dataBytes(await file.getTensor('float64_35'));
    } catch (error) {
      expect((await errorOf(() => Promise.reject(error))).code).toBe('Io');
    }
    if (result) expectSameBytes(result, tensorBytes(FLUX, 'float64_35'));
  });
});

/**
 * Either `fn` gives exactly `expected` bytes, or it fails with a SafetensorsError 'Io'. With `strict`,
 * only the error is acceptable.
 */
async function correctOrIo(fn: () => Promise<Uint8Array>, expected: Uint8Array, strict: boolean): Promise<'data' | 'Io'> {
  let bytes: Uint8Array;
  try {
    bytes = await fn();
  } catch (error) {
    const e = await errorOf(() => Promise.reject(error));
    expect(e.code, e.message).toBe('Io');
    expect(e.message.length).toBeGreaterThan(10);
    return 'Io';
  }
  expect(strict, 'this fault must be an Io error, but the read succeeded').toBe(false);
  expectSameBytes(bytes, expected);
  return 'data';
}

describe('faulty servers: correct data or an Io error, never wrong data', () => {
  const lastBytes = tensorBytes(LORA, LAST_LORA.name);

  // [mode, strict]: strict modes cannot give correct data, or (ETag) must be refused.
  const modes: Array<[string, boolean]> = [
    ['drop', true],
    ['short-content-length', true],
    ['short-content-range', true],
    ['later-start', true],
    ['ok-no-range-header', true],
    ['status-500', true],
    ['status-404', true],
    ['status-401', true],
    ['gzip-200', true],
    ['earlier-start', false],
    ['extra-bytes', false],
  ];

  test.each(modes)('%s on the first request: open() fails with Io', async (mode, strict) => {
    const url = faultUrl(mode, 0);
    await correctOrIo(async () => {
      const file = await open(url);
      return dataBytes(await file.getTensor(LAST_LORA.name));
    }, lastBytes, strict);
    expect(faulty.log.length).toBeGreaterThanOrEqual(1);
  });

  test.each([...modes, ['etag-change', true], ['other-total', false]] as Array<[string, boolean]>)(
    '%s on a later request: getTensor fails with Io (the header was fine)',
    async (mode, strict) => {
      const file = await open(faultUrl(mode, 1));
      expect(file.names().length).toBe(256);
      await correctOrIo(async () => dataBytes(await file.getTensor(LAST_LORA.name)), lastBytes, strict);
      // Reading a slice through the same broken server is no better.
      await correctOrIo(async () => dataBytes(await file.getSlice(LAST_LORA.name, [[0, 1]])), lastBytes.subarray(0, LAST_LORA.shape.slice(1).reduce((a, b) => a * b, 1) * 4), strict);
    },
  );

  test('an ETag that changes after the header request is refused, not mixed into the data', async () => {
    const file = await open(faultUrl('etag-change', 1));
    const error = await expectError(() => file.getTensor(loraTensors[3].name), 'Io');
    expect(error.message).toMatch(/etag|changed/i);
  });
});

describe('abort', () => {
  test('an already aborted signal: open() fails with Aborted', async () => {
    await expectError(() => open(`${ranged.origin}/${FLUX_NAME}`, { signal: AbortSignal.abort() }), 'Aborted');
  });

  test('a server that never answers: aborting ends open() with Aborted', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    await expectError(() => open(faultUrl('hang-before-headers', 0), { signal: controller.signal }), 'Aborted');
  });

  test('a server that stalls mid-body: aborting ends getTensor with Aborted', async () => {
    const controller = new AbortController();
    const file = await open(faultUrl('hang-mid-body', 1), { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expectError(() => file.getTensor(LAST_LORA.name), 'Aborted');
  });

  test('aborting after open(): the next read fails with Aborted and sends no request', async () => {
    const controller = new AbortController();
    const file = await open(`${ranged.origin}/${LORA_NAME}`, { signal: controller.signal });
    controller.abort();
    ranged.clear();
    await expectError(() => file.getTensor(LAST_LORA.name), 'Aborted');
    expect(ranged.bytesSent()).toBe(0);
  });
});

test('random slices over HTTP read exactly the bytes they cover', async () => {
  // [4, 1280] and [1280, 4] F32 tensors: random row ranges; bytes sent = rows × row bytes.
  const r = rng(4);
  const file = await open(`${ranged.origin}/${LORA_NAME}`);
  const candidates = loraTensors.filter((t) => t.shape.length === 2 && t.dtype === 'F32');
  for (let i = 0; i < 20; i++) {
    const t = candidates[r.int(0, candidates.length - 1)];
    const [rows, cols] = t.shape;
    const a = r.int(0, rows - 1);
    const b = r.int(a + 1, rows);
    ranged.clear();
    const s = await file.getSlice(t.name, [[a, b]]);
    expect(s.shape).toEqual([b - a, cols]);
    expect(ranged.bytesSent()).toBe((b - a) * cols * 4);
    expectSameBytes(dataBytes(s), tensorBytes(LORA, t.name).subarray(a * cols * 4, b * cols * 4));
  }
});
