// The wasm core's exports. Every function takes pointers and lengths into linear memory; JS owns
// everything above heapBase().
export { scanHeader, resultPtr } from './header';
export { dtypeTable } from './dtypes';

export function heapBase(): usize {
  return __heap_base;
}
