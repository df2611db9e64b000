// How open() reads through a `cache` option without importing the cache itself (src/cache/cache.ts): the cache's
// code comes with createCache(), so a page that never makes a cache does not carry it. The hook owns the
// cache's public interface, which the cache implements.
import type { HttpSource } from '../sources/http/source.ts'

/** A persistent cache made by createCache(), for open()/openModel()'s `cache` option. */
export interface RangeCache {
  /** Bytes the cache's files take, as stored now. */
  usage(): Promise<number>
  /** Removes every entry of the cache (and nothing else in its folder). */
  clear(): Promise<void>
}

/** The method by which a cache made by createCache() wraps an HTTP source. */
export const readThrough = Symbol('readThrough')

interface ReadThrough {
  [readThrough](http: HttpSource): HttpSource
}

/** Throws the TypeError of a `cache` option that createCache() did not make. */
export function checkCache(cache: unknown): asserts cache is RangeCache | undefined {
  if (cache !== undefined && typeof (cache as Partial<ReadThrough> | null)?.[readThrough] !== 'function')
    throw new TypeError(`cache must be a RangeCache made by createCache(), not ${Object.prototype.toString.call(cache)}`)
}

/** `http` read through `cache` (when there is one). */
export function withCache(http: HttpSource, cache: RangeCache | undefined): HttpSource {
  checkCache(cache)
  return cache ? (cache as unknown as ReadThrough)[readThrough](http) : http
}
