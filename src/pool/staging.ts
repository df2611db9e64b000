// One buffer that every piece of a pipeline goes through, in shared memory where the runtime has it, so that the
// pool's workers write it directly. A worker's heap keeps a SharedArrayBuffer it was sent until it collects its
// garbage, and V8 does not count shared memory towards collecting: a new result for each piece made a 1 GiB GGUF's
// conversion to a folder peak at 1 GB of RSS, where one reused buffer keeps it to that buffer.

/** A buffer reused for piece after piece: what a piece put there is valid until the next is asked for. */
export class Staging {
  #bytes: Uint8Array = new Uint8Array(0)

  /** The first `length` bytes of the buffer, grown (new) when it holds fewer. */
  bytes(length: number): Uint8Array {
    if (this.#bytes.length < length)
      this.#bytes = new Uint8Array(typeof SharedArrayBuffer === 'function' ? new SharedArrayBuffer(length) : new ArrayBuffer(length))
    return this.#bytes.subarray(0, length)
  }

  /** The first `count` floats of the buffer, as bytes() gives them. */
  floats(count: number): Float32Array {
    const bytes = this.bytes(count * 4)
    return new Float32Array(bytes.buffer, bytes.byteOffset, count)
  }
}
