// openGguf(): a GGUF file behind any source, read lazily as open() reads a SafeTensors file: the header first
// (src/gguf/reader.ts), then only the bytes of the tensors or rows asked for. Tensors of the plain types (F32,
// F16, BF16, F64, I8 to I64) are read as a SafeTensors file's are, by a SafetensorsFile over the same source
// whose header lists them; the quantized types are read as their blocks and dequantized.
import { type DType, isDType } from '../core/dtypes.ts'
import { SafetensorsError } from '../errors.ts'
import { Header, type TensorInfo } from '../format/header.ts'
import type { SliceRange } from '../format/slice.ts'
import { type DataFor, type OpenOptions, openSource, type ReadOptions, SafetensorsFile, type Source, type Tensor } from '../read/file.ts'
import { ProgressMeter } from '../sources/progress.ts'
import type { RangeSource } from '../sources/source.ts'
import { GGML_TYPES, type GgmlType } from './ggml-types.ts'
import { type GgufHeader, type GgufTensorInfo, type GgufValue, readGgufHeader } from './reader.ts'

/** Options of {@link openGguf}: those of {@link index!open} but `byteOrder`, which a GGUF file states itself. */
export type GgufOpenOptions = Omit<OpenOptions, 'byteOrder'>

/**
 * Opens a GGUF file (v2 or v3, little- or big-endian) and reads its header: over HTTP the first 64 KiB, then
 * more only as far as the header goes. Tensors are read when asked for, each reading only its own bytes.
 *
 * @throws {@link index!SafetensorsError} `InvalidGguf` for a file that is not a GGUF this library reads (the message
 * names the key, tensor or byte offset); `Io` when the source cannot be read; `Aborted` when `options.signal` aborts.
 * @throws TypeError for a value that cannot be opened (an unsupported URL scheme; a path in the browser entry) or
 * an option of the wrong type; RangeError for an option out of range.
 */
export async function openGguf(input: Source, options: GgufOpenOptions = {}): Promise<GgufFile> {
  const meter = options.onProgress && new ProgressMeter(options.onProgress)
  return openSource(input, options, meter, async (source) => new GgufFile(await readGgufHeader(source, options.signal), source))
}

/** An open GGUF file, from {@link openGguf}: its header and metadata, and reads of its tensors. */
export class GgufFile {
  readonly #byName: Map<string, GgufTensorInfo>
  /** The plain tensors as a SafeTensors file's, which reads them. */
  readonly #plain: SafetensorsFile

  /** @internal made by openGguf() */
  constructor(
    /** The parsed, checked header: version, byte order, alignment, metadata, tensors. */
    readonly header: GgufHeader,
    /** Where the bytes come from. */
    readonly source: RangeSource,
  ) {
    this.#byName = new Map(header.tensors.map((t) => [t.name, t]))
    const plain: TensorInfo[] = header.tensors.flatMap(({ name, type, shape, byteLength, offset }) => {
      if (!isDType(type)) return []
      const begin = offset - header.dataStart
      return [{ name, dtype: type, shape, dataOffsets: [begin, begin + byteLength], byteLength }]
    })
    // The data section starts where a SafeTensors header of dataStart - 8 bytes would end.
    this.#plain = new SafetensorsFile(new Header(header.dataStart - 8, header.fileSize, null, plain), source, header.byteOrder)
  }

  /** Every key-value pair of the header, in file order: 64-bit integers as bigint, arrays of numbers as typed arrays. */
  get metadata(): Record<string, GgufValue> {
    return this.header.metadata
  }

  /** Tensor names in file order. */
  names(): string[] {
    return this.header.tensors.map((t) => t.name)
  }

  /**
   * The header's entry for one tensor: its name, ggml type, shape (outermost first), bytes and file offset.
   * @throws {@link index!SafetensorsError} `TensorNotFound`
   */
  info(name: string): GgufTensorInfo {
    const info = this.#byName.get(name)
    if (!info) throw new SafetensorsError('TensorNotFound', `no tensor named ${JSON.stringify(name)} in this GGUF file (it has ${this.#byName.size})`)
    return info
  }

  /**
   * Reads one tensor's bytes and nothing else. Plain types (F32, F16, BF16, F64, I8 to I64) come in their own
   * dtype unless `options.dtype` says otherwise, as {@link index!SafetensorsFile.getTensor} gives them.
   * @throws {@link index!SafetensorsError} `TensorNotFound`; `UnsupportedConversion` (no conversion to that dtype);
   * `UnsupportedQuantization` (a quantized type this library does not dequantize); `Io`; `Aborted`.
   * @throws RangeError for an `out` too small or misaligned; TypeError for `float16Array` where the runtime has
   * no Float16Array.
   */
  async getTensor<D extends DType, H extends boolean = false>(name: string, options: ReadOptions<D, H> = {}): Promise<Tensor<DataFor<D, H>>> {
    const info = this.info(name)
    if (isDType(info.type)) return this.#plain.getTensor(name, options)
    throw unsupported(info.type)
  }

  /**
   * Reads only the rows a slice covers: one {@link index!SliceRange} per leading dimension, as
   * {@link index!SafetensorsFile.getSlice} takes them.
   * @throws {@link index!SafetensorsError} `TensorNotFound`; `SliceOutOfRange`; `TooManySlices`; `UnsupportedConversion`;
   * `UnsupportedQuantization`; `Io`; `Aborted`.
   * @throws RangeError and TypeError as {@link GgufFile.getTensor} does.
   */
  async getSlice<D extends DType, H extends boolean = false>(
    name: string,
    ranges: readonly SliceRange[],
    options: ReadOptions<D, H> = {},
  ): Promise<Tensor<DataFor<D, H>>> {
    const info = this.info(name)
    if (isDType(info.type)) return this.#plain.getSlice(name, ranges, options)
    throw unsupported(info.type)
  }

  /** Releases the source (a local file's handle). A file dropped without it closes when it is collected. */
  async close(): Promise<void> {
    await this.source.close?.()
  }

  /** close(), for `await using file = await openGguf(...)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }
}

function unsupported(type: GgmlType): SafetensorsError {
  const plain = Object.keys(GGML_TYPES).filter(isDType)
  return new SafetensorsError('UnsupportedQuantization', `${type} tensors cannot be read yet; the GGUF types read are ${plain.join(', ')}`)
}
