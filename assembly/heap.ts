// The first byte of linear memory past the static data: JS manages everything above it.
export function heapBase(): usize {
  return __heap_base;
}
