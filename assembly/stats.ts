// Statistics of F32 data for `inspect --tensor` and the inspector: two passes, each callable chunk by
// chunk. Pass 1 finds the count, min, max and sum of the finite values and counts NaN and infinities;
// pass 2 bins the finite values and sums squared deviations from the mean (stabler than sum of squares).

import {
  STATS_BINS, STATS_COUNTS, STATS_DEVIATIONS, STATS_FINITE, STATS_MAX, STATS_MEAN, STATS_MIN, STATS_NAN,
  STATS_NEG_INF, STATS_POS_INF, STATS_SIZE, STATS_SUM,
} from './boundary/stats';

const STATS = memory.data(<i32>STATS_SIZE, 8);

export function statsPtr(): usize {
  return STATS;
}

export function statsReset(): void {
  memory.fill(STATS, 0, STATS_SIZE);
  store<f64>(STATS + STATS_MIN, Infinity);
  store<f64>(STATS + STATS_MAX, -Infinity);
}

export function statsFirstPass(ptr: usize, count: usize): void {
  let sum: f64 = 0, lo = load<f64>(STATS + STATS_MIN), hi = load<f64>(STATS + STATS_MAX);
  let finite: u64 = 0, nan: u64 = 0, posInf: u64 = 0, negInf: u64 = 0;
  for (let i: usize = 0; i < count; i++) {
    let x = <f64>load<f32>(ptr + (i << 2));
    if (x - x == 0) {
      sum += x;
      lo = min(lo, x);
      hi = max(hi, x);
      finite++;
    } else if (x != x) nan++;
    else if (x > 0) posInf++;
    else negInf++;
  }
  store<f64>(STATS + STATS_SUM, load<f64>(STATS + STATS_SUM) + sum);
  store<f64>(STATS + STATS_MIN, lo);
  store<f64>(STATS + STATS_MAX, hi);
  store<u64>(STATS + STATS_FINITE, load<u64>(STATS + STATS_FINITE) + finite);
  store<u64>(STATS + STATS_NAN, load<u64>(STATS + STATS_NAN) + nan);
  store<u64>(STATS + STATS_POS_INF, load<u64>(STATS + STATS_POS_INF) + posInf);
  store<u64>(STATS + STATS_NEG_INF, load<u64>(STATS + STATS_NEG_INF) + negInf);
}

// Adds the finite values to STATS_BINS u32 counters at STATS_COUNTS spanning [min, max] (the first pass's); the
// last bin is closed.
export function statsSecondPass(ptr: usize, count: usize): void {
  let mean = load<f64>(STATS + STATS_MEAN), lo = load<f64>(STATS + STATS_MIN), hi = load<f64>(STATS + STATS_MAX);
  let bins = load<u32>(STATS + STATS_BINS), counts: usize = load<u32>(STATS + STATS_COUNTS);
  let deviations: f64 = 0;
  let scale = hi > lo ? <f64>bins / (hi - lo) : 0;
  for (let i: usize = 0; i < count; i++) {
    let x = <f64>load<f32>(ptr + (i << 2));
    if (x - x != 0) continue;
    deviations += (x - mean) * (x - mean);
    let bin = <u32>min(<f64>(bins - 1), Math.floor((x - lo) * scale));
    let at = counts + (<usize>bin << 2);
    store<u32>(at, load<u32>(at) + 1);
  }
  store<f64>(STATS + STATS_DEVIATIONS, load<f64>(STATS + STATS_DEVIATIONS) + deviations);
}
