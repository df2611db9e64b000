// The contract of the statistics module (assembly/stats.ts, build/stats.wasm) with src/core/stats.ts: the STATS
// struct at statsPtr(), which the passes add to and JS reads, and where JS puts the second pass's inputs. Each
// field's comment starts with its type.
export const STATS_SUM: usize = 0; // f64 of the finite values
export const STATS_MIN: usize = 8; // f64 of the finite values
export const STATS_MAX: usize = 16; // f64 of the finite values
export const STATS_DEVIATIONS: usize = 24; // f64 sum of squared deviations from STATS_MEAN (second pass)
export const STATS_FINITE: usize = 32; // u64 count
export const STATS_NAN: usize = 40; // u64 count
export const STATS_POS_INF: usize = 48; // u64 count
export const STATS_NEG_INF: usize = 56; // u64 count
export const STATS_MEAN: usize = 64; // f64 input of the second pass
export const STATS_BINS: usize = 72; // u32 input of the second pass: counters at STATS_COUNTS spanning [min, max]
export const STATS_COUNTS: usize = 76; // u32 pointer to the u32 counters
export const STATS_SIZE: usize = 80;
