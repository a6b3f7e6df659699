//! How the study tables compute and write their figures: medians over rounds, ratios taken
//! per round, and numbers rounded for a table.

pub use lx_client::stats::median;

/// Each round's `ours ÷ theirs`, in round order (as many as both sides have).
pub fn per_round(ours: &[f64], theirs: &[f64]) -> Vec<f64> {
    ours.iter().zip(theirs).map(|(o, t)| o / t).collect()
}

/// The median of the rounds' own ratios: both sides of a round ran minutes apart at most,
/// so a machine that drifts between rounds moves both sides of each ratio alike.
pub fn paired_ratio(ours: &[f64], theirs: &[f64]) -> f64 {
    median(&per_round(ours, theirs))
}

/// `x` with `decimals` decimals, or a dash when it is not a number (nothing was measured).
pub fn fixed(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "-".into()
    }
}

/// `x` to three significant digits (282, 30.1, 7.58, 0.210), or a dash.
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}")
}

/// A whole number with thousands separated by commas (13,417), or a dash.
pub fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

/// A Markdown row of `cells`.
pub fn row<S: AsRef<str>>(cells: &[S]) -> String {
    let cells: Vec<&str> = cells.iter().map(AsRef::as_ref).collect();
    format!("| {} |", cells.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_ratios_and_rounding() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
        assert!(median(&[]).is_nan());
        assert_eq!(paired_ratio(&[2.0, 3.0, 10.0], &[1.0, 3.0, 4.0]), 2.0);
        assert_eq!((sig3(282.09), sig3(30.100), sig3(7.578), sig3(0.2096), sig3(1234.6)), ("282".into(), "30.1".into(), "7.58".into(), "0.210".into(), "1235".into()));
        assert_eq!((thousands(13416.6), thousands(3059.7), thousands(512.0), thousands(1_234_567.0)), ("13,417".into(), "3,060".into(), "512".into(), "1,234,567".into()));
        assert_eq!((fixed(f64::NAN, 1), fixed(1.26, 1), thousands(f64::NAN)), ("-".into(), "1.3".into(), "-".into()));
        assert_eq!(row(&["a", "b"]), "| a | b |");
    }
}

/// A demo check's measured value: two decimals, or where that would read 0.00 for what is not
/// 0 (a divergence of 1e-4), two significant digits in scientific notation.
pub fn check_value(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        format!("{v:.1e}")
    } else {
        format!("{v:.2}")
    }
}
