// Statistics of F32 data for `inspect --tensor` and the inspector: two passes, each callable chunk by
// chunk. Pass 1 finds the count, min, max and sum of the finite values and counts NaN and infinities;
// pass 2 bins the finite values and sums squared deviations from the mean (stabler than sum of squares).

const STATS = memory.data(64, 8);
// f64 [0] sum, [8] min, [16] max, [24] squared deviations; u64 [32] finite, [40] NaN, [48] +Inf, [56] -Inf

export function statsPtr(): usize {
  return STATS;
}

export function statsReset(): void {
  memory.fill(STATS, 0, 64);
  store<f64>(STATS, Infinity, 8);
  store<f64>(STATS, -Infinity, 16);
}

export function statsFirstPass(ptr: usize, count: usize): void {
  let sum: f64 = 0, lo = load<f64>(STATS, 8), hi = load<f64>(STATS, 16);
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
  store<f64>(STATS, load<f64>(STATS) + sum);
  store<f64>(STATS, lo, 8);
  store<f64>(STATS, hi, 16);
  store<u64>(STATS, load<u64>(STATS, 32) + finite, 32);
  store<u64>(STATS, load<u64>(STATS, 40) + nan, 40);
  store<u64>(STATS, load<u64>(STATS, 48) + posInf, 48);
  store<u64>(STATS, load<u64>(STATS, 56) + negInf, 56);
}

// Adds the finite values to `bins` u32 counters at `counts` spanning [lo, hi]; the last bin is closed.
export function statsSecondPass(ptr: usize, count: usize, mean: f64, lo: f64, hi: f64, bins: u32, counts: usize): void {
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
  store<f64>(STATS, load<f64>(STATS, 24) + deviations, 24);
}
