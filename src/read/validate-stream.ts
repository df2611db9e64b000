// A whole SafeTensors file checked as it flows by (and, optionally, forwarded once checked), holding the
// header and one chunk at most.

import { SafetensorsError } from '../errors.ts'
import { type Header, notSafetensors, parseHeaderOfUnknownSize, readHeaderSize } from '../format/header.ts'
import { abortableRun, asSafetensorsError, StreamInput } from './streams.ts'

/** The bytes from where the data ends on, which a file must not have. */
function trailingBytes(header: Header): SafetensorsError {
  return new SafetensorsError('MetadataIncompleteBuffer', `the tensors end at file offset ${header.fileSize}, but the stream goes on past it (trailing bytes)`)
}

export function cutShort(header: Header, position: number): SafetensorsError {
  return new SafetensorsError(
    'MetadataIncompleteBuffer',
    `the tensors end at file offset ${header.fileSize}, but the stream ended after ${position} bytes (${header.fileSize - position} bytes missing)`,
  )
}

/**
 * Reads a stream's length prefix and header and validates the header as parseHeader does, as soon as it
 * has arrived. Only the last rule waits: the file size is known at the end of the stream, so the
 * returned Header's fileSize is the size the offsets imply. Returns the header's bytes too (8 + N).
 */
export async function readStreamHeader(input: StreamInput): Promise<{ header: Header; head: Uint8Array }> {
  const prefix = new Uint8Array(8)
  const got = await input.fill(prefix)
  if (got < 8) throw notSafetensors('HeaderTooSmall', `the stream ended after ${got} bytes; a SafeTensors file starts with an 8-byte header length`)
  // Only HeaderTooLarge can be known from the prefix alone; InvalidHeaderLength needs the bytes that follow.
  const n = readHeaderSize(prefix, Number.MAX_SAFE_INTEGER)
  // Grown as the header arrives: a prefix that lies about N costs no more than the bytes really sent.
  let head = new Uint8Array(Math.min(8 + n, 1 << 16))
  head.set(prefix)
  let filled = 8
  while (filled < 8 + n) {
    if (filled === head.length) {
      const bigger = new Uint8Array(Math.min(8 + n, head.length * 2))
      bigger.set(head)
      head = bigger
    }
    const part = await input.fill(head.subarray(filled))
    filled += part
    if (filled < head.length) {
      throw notSafetensors(
        'InvalidHeaderLength',
        `the header length is ${n} bytes, but the stream ended ${filled - 8} bytes after the 8-byte prefix`,
        ' (or a truncated one)',
      )
    }
  }
  return { header: parseHeaderOfUnknownSize(head), head }
}

/** Takes the end of the stream: trailing bytes are MetadataIncompleteBuffer. */
export async function expectEnd(input: StreamInput, header: Header): Promise<void> {
  if (await input.next(1)) throw trailingBytes(header)
}

/** Options of {@link validateStream}. */
export interface ValidateStreamOptions {
  /** Aborts the check: it rejects with `Aborted`, and the stream is cancelled. */
  signal?: AbortSignal
  /**
   * Where the checked bytes go (an upload, say): the header once it is valid, then the data as it
   * arrives, each part once the next has come and the last once the whole file checks out. Closed when
   * the whole file is valid, aborted with the error otherwise, so that whatever reads from it sees a
   * complete file or a failure: an invalid file never reaches it whole, so even a sink that stores what
   * reaches its length (R2's put through a FixedLengthStream) stores nothing.
   * @defaultValue none: the bytes are only checked
   */
  forward?: WritableStream<Uint8Array>
}

/**
 * Checks a whole SafeTensors file as it flows by, holding the header and one chunk at most: the header
 * as soon as it has arrived (parseHeader's scanner and codes), then the data's length against the
 * offsets, then the end. Resolves with the Header; rejects with the code parseHeader gives for the same
 * bytes. The stream is consumed, and cancelled on a failure.
 * @throws {@link SafetensorsError} `HeaderTooSmall`, `HeaderTooLarge`, `InvalidHeaderLength`,
 * `InvalidHeader`, `InvalidHeaderDeserialization`, `InvalidOffset`, `ValidationOverflow`, `MisalignedSlice`,
 * `TensorInvalidInfo`, `MetadataIncompleteBuffer` (data cut short, or bytes after the last tensor); `Io` when the stream errors or `forward` fails; `Aborted`.
 */
export async function validateStream(stream: ReadableStream<Uint8Array>, options: ValidateStreamOptions = {}): Promise<Header> {
  const input = new StreamInput(stream)
  const out = options.forward?.getWriter()
  const forward = async (send: () => Promise<void>) => {
    try {
      await send()
    } catch (cause) {
      throw asSafetensorsError(cause, 'forwarding the stream failed')
    }
  }
  const run = abortableRun(options.signal, async () => {
    const { header, head } = await readStreamHeader(input)
    // Each part goes on once the next has come, and the last once the end checks out: a sink that stores
    // whatever reaches the length it was told (R2's put through a FixedLengthStream of the upload's
    // Content-Length) then never gets the whole of an invalid file, cut short or running on.
    let held = head
    while (input.position < header.fileSize) {
      const part = await input.next(header.fileSize - input.position)
      if (!part) throw cutShort(header, input.position)
      if (out) await forward(() => out.write(held))
      held = part
    }
    await expectEnd(input, header)
    if (out) {
      await forward(() => out.write(held))
      await forward(() => out.close())
    }
    return header
  })
  try {
    return await run.done
  } catch (error) {
    await input.cancel(error)
    // Not awaited: a sink's abort waits for the write in flight, which backpressure may hold for ever.
    out?.abort(error).catch(() => {})
    throw error
  }
}
