//! Distributions of per-request figures: p50, p90, p95, p99, mean, min, max.
//!
//! Percentiles come from an HDR histogram (3 significant digits, so each is within
//! 0.1% of the exact sample quantile); mean, min and max are exact.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Summary of one figure over the requests of a point. Never a mean alone.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, ts_rs::TS)]
pub struct Distribution {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// How many samples it summarises.
    pub count: u64,
}

/// Values are scaled by this before going into the integer histogram, so that
/// milliseconds keep microsecond resolution and rates keep 0.001 tok/s.
const SCALE: f64 = 1000.0;

impl Distribution {
    /// Summarise `samples`. Non-finite and negative samples are ignored; an empty set gives all zeros.
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Self {
        let mut hist = Histogram::<u64>::new(3).expect("3 significant digits is a valid precision");
        let (mut sum, mut min, mut max, mut count) = (0.0, f64::INFINITY, f64::NEG_INFINITY, 0u64);
        for v in samples.into_iter().filter(|v| v.is_finite() && *v >= 0.0) {
            hist.record((v * SCALE).round() as u64).expect("auto-resizing histogram accepts any u64");
            sum += v;
            min = min.min(v);
            max = max.max(v);
            count += 1;
        }
        if count == 0 {
            return Self::default();
        }
        let q = |p: f64| hist.value_at_quantile(p) as f64 / SCALE;
        Self { p50: q(0.50), p90: q(0.90), p95: q(0.95), p99: q(0.99), mean: sum / count as f64, min, max, count }
    }
}

/// The median of the finite values (the mean of the middle two for an even count); NaN when
/// there are none. For a handful of per-round figures, where a histogram would be too much.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= b.abs() * 0.001 + 1e-9
    }

    #[test]
    fn percentiles_of_one_to_one_hundred() {
        let d = Distribution::of((1..=100).map(f64::from));
        assert!(close(d.p50, 50.0), "{d:?}");
        assert!(close(d.p90, 90.0), "{d:?}");
        assert!(close(d.p95, 95.0), "{d:?}");
        assert!(close(d.p99, 99.0), "{d:?}");
        assert_eq!((d.min, d.max, d.count), (1.0, 100.0, 100));
        assert!(close(d.mean, 50.5));
    }

    #[test]
    fn skewed_samples_keep_their_tail() {
        // 95 fast requests and 5 slow ones: the mean hides what p99 shows.
        let samples = std::iter::repeat_n(10.0, 95).chain(std::iter::repeat_n(1000.0, 5));
        let d = Distribution::of(samples);
        assert!(close(d.p50, 10.0) && close(d.p90, 10.0) && close(d.p95, 10.0), "{d:?}");
        assert!(close(d.p99, 1000.0), "{d:?}");
        assert!(close(d.mean, 59.5), "{d:?}");
    }

    #[test]
    fn fractional_values_keep_resolution() {
        let d = Distribution::of([0.25, 0.5, 0.75]);
        assert!(close(d.p50, 0.5), "{d:?}");
        assert_eq!(d.min, 0.25);
    }

    #[test]
    fn empty_and_invalid_samples_give_zeros() {
        assert_eq!(Distribution::of([]), Distribution::default());
        assert_eq!(Distribution::of([f64::NAN, -1.0]).count, 0);
    }
}
