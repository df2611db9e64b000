// Tensor data in SafeTensors is little-endian; typed arrays use the host's order. Where the two differ
// (a big-endian host, or a legacy big-endian file) readers swap bytes.
export type ByteOrder = 'little' | 'big'

const NATIVE: ByteOrder = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 'little' : 'big'
let host: ByteOrder = NATIVE

export function hostByteOrder(): ByteOrder {
  return host
}

/** Tests only: behave as if the host had this byte order (there is no big-endian machine to run on). */
export function simulateHostByteOrder(order: ByteOrder = NATIVE): void {
  host = order
}
