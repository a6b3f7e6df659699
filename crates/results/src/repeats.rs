//! Points measured more than once (`lx sweep --repetitions N`): the spread between the
//! repetitions of one point, so that a difference between settings, backends or runs can be
//! told from the machine's own noise. A point's request-level distribution says how requests
//! vary within one measurement; repetitions say how the measurement itself varies (a busy
//! neighbour, clock drift, a cold cache), which is usually the larger effect on a laptop.

use serde::Serialize;

use crate::results::PointResult;

/// Mean and standard deviation of one figure over repetitions, with the 95% interval of the
/// mean (Student's t with n − 1 degrees of freedom: few repetitions give a wide interval).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub mean: f64,
    pub sd: f64,
    pub low: f64,
    pub high: f64,
    pub n: usize,
}

impl Spread {
    /// The spread of the finite values in `v`; `None` with fewer than two.
    pub fn of(v: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let v: Vec<f64> = v.into_iter().filter(|x| x.is_finite()).collect();
        let n = v.len();
        if n < 2 {
            return None;
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let half = t975(n - 1) * sd / (n as f64).sqrt();
        Some(Spread { mean, sd, low: mean - half, high: mean + half, n })
    }

    /// `mean ± sd [low, high]` with `decimals` places.
    pub fn describe(&self, decimals: usize) -> String {
        format!("{:.d$} ± {:.d$} [{:.d$}, {:.d$}]", self.mean, self.sd, self.low, self.high, d = decimals)
    }
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
        2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        // the normal quantile and the first two terms of t's expansion in 1/df
        _ => {
            let (z, n) = (1.959_964f64, df as f64);
            z + (z.powi(3) + z) / (4.0 * n) + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
        }
    }
}

/// Figures of one repetition, in the order of [`crate::compare::FIGURES`] (`None` where the point has none:
/// a server reports no prefill, a failed point has no requests).
pub fn figures(p: &PointResult) -> [Option<f64>; 4] {
    let p50 = |d: &lx_client::stats::Distribution| (d.count > 0).then_some(d.p50);
    [p50(&p.ttft_ms), p50(&p.prefill_tps), p50(&p.decode_tps), (p.requests > 0).then_some(p.throughput_tps)]
}

/// One point measured several times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatedPoint {
    pub test: String,
    pub backend: String,
    pub policy: String,
    pub repetitions: usize,
    /// In the order of [`crate::compare::FIGURES`].
    pub figures: [Option<Spread>; 4],
}

/// The points of `points` that were repeated, grouped by what was measured, in the order
/// their first repetitions ran.
pub fn summarise(points: &[PointResult]) -> Vec<RepeatedPoint> {
    let mut groups: Vec<Vec<&PointResult>> = Vec::new();
    for p in points.iter().filter(|p| p.repetition.is_some()) {
        match groups.iter_mut().find(|g| g[0].key() == p.key()) {
            Some(g) => g.push(p),
            None => groups.push(vec![p]),
        }
    }
    groups
        .into_iter()
        .map(|reps| {
            let all: Vec<[Option<f64>; 4]> = reps.iter().map(|p| figures(p)).collect();
            let spread = |i: usize| Spread::of(all.iter().filter_map(|f| f[i]));
            let (test, backend, policy) = reps[0].key();
            RepeatedPoint { test, backend, policy, repetitions: reps.len(), figures: [spread(0), spread(1), spread(2), spread(3)] }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_the_mean_with_students_interval() {
        // 10, 12, 14: mean 12, sd 2, half-width 4.303 · 2 / √3
        let s = Spread::of([10.0, 12.0, 14.0]).unwrap();
        assert_eq!((s.mean, s.sd, s.n), (12.0, 2.0, 3));
        let half = 4.303 * 2.0 / 3f64.sqrt();
        assert!((s.low - (12.0 - half)).abs() < 1e-12 && (s.high - (12.0 + half)).abs() < 1e-12, "{s:?}");
        assert_eq!(s.describe(1), "12.0 ± 2.0 [7.0, 17.0]");
        // Identical repetitions: no spread at all.
        let s = Spread::of([5.0, 5.0]).unwrap();
        assert_eq!((s.sd, s.low, s.high), (0.0, 5.0, 5.0));
        assert_eq!(Spread::of([1.0]), None);
        assert_eq!(Spread::of([1.0, f64::NAN]), None);
    }

    #[test]
    fn t_quantiles_fall_towards_the_normal() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(30), 2.042);
        // t(31) = 2.0395, t(60) = 2.0003
        assert!((t975(31) - 2.0395).abs() < 1e-3 && (t975(60) - 2.0003).abs() < 1e-3, "{} {}", t975(31), t975(60));
        assert!((t975(10_000) - 1.96).abs() < 1e-3);
        assert!(t975(0).is_infinite());
    }
}
