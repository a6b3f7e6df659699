//! What disaggregated serving moved at a point: each prefilled sequence's state on its way
//! from the prefill worker to the decode worker, split into saving it (the prefill worker),
//! carrying it (the pipe through the coordinator or the file, and the wait for the decode
//! worker's current pass to end), and loading it (the decode worker), against the TTFT it is
//! part of.

use lx_client::records::Transfer;
use lx_client::stats::median;

use lx_engine::backend::BackendInfo;

use crate::results::PointResult;
use crate::studies::numbers::fixed;

/// One row per point of these runs (each its backends and points) whose requests moved
/// states; empty when none did.
pub fn transfer_table<'a>(runs: impl IntoIterator<Item = (&'a [BackendInfo], &'a [PointResult])>) -> Vec<String> {
    let mut rows = Vec::new();
    for (backends, points) in runs {
        // The split and path each worker pair ran with, as its backend reported it.
        let split = |backend: &str| {
            backends.iter().find(|b| b.name == backend && b.settings.contains_key("disaggregated")).map(|b| b.settings["disaggregated"].clone()).unwrap_or_default()
        };
        for p in points {
            let moved: Vec<(Transfer, f64)> = p.samples.iter().filter_map(|r| Some((r.transfer?, r.ttft_ms()?))).collect();
            if moved.is_empty() {
                continue;
            }
            let of = |f: &dyn Fn(&Transfer) -> f64| median(&moved.iter().map(|(t, _)| f(t)).collect::<Vec<_>>());
            let share = median(&moved.iter().map(|(t, ttft)| t.ms() / ttft).collect::<Vec<_>>());
            rows.push(format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                p.backend,
                split(&p.backend),
                p.test_name(),
                moved.len(),
                fixed(of(&|t| t.bytes as f64 / 1e6), 2),
                fixed(of(&|t| t.save_end_ms - t.save_start_ms), 1),
                fixed(of(&|t| t.load_start_ms - t.save_end_ms), 1),
                fixed(of(&|t| t.load_end_ms - t.load_start_ms), 1),
                fixed(of(&Transfer::ms), 1),
                fixed(of(&|t| t.bytes_per_s().unwrap_or(f64::NAN) / 1e6), 0),
                fixed(share * 100.0, 0),
            ));
        }
    }
    if rows.is_empty() {
        return rows;
    }
    let mut table = vec![
        "| backend | workers | test | states moved | MB p50 | save ms p50 | carry ms p50 | load ms p50 | transfer ms p50 | MB/s p50 | % of TTFT p50 |".to_string(),
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |".to_string(),
    ];
    table.extend(rows);
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use lx_client::records::RequestRecord;
    use lx_engine::scheduler::FinishReason;

    #[test]
    fn a_point_that_moved_states_is_a_row_split_into_its_parts() {
        let mut info = BackendInfo { name: "llama".into(), ..Default::default() };
        info.settings.insert("disaggregated".into(), "prefill 1 thread, decode 1 thread, via file".into());
        let backends = vec![info];
        let mut points = Vec::new();
        let spec = lx_client::traffic::PointSpec { prompt_tokens: 2048, max_tokens: 4, concurrency: 3, requests: 3, warmup: 0, stop_at_eos: false, top_logprobs: 0 };
        let mut point = crate::results::PointResult::from_run("llama", lx_engine::scheduler::Policy::Disaggregated, &spec, Default::default());
        for (i, carry) in [10.0, 30.0, 20.0].into_iter().enumerate() {
            let mut r = RequestRecord::new(i as u64, 2048, 4, 0.0);
            r.token_ms = vec![200.0, 240.0];
            r.finish = Some(FinishReason::Length);
            r.transfer = Some(Transfer { bytes: 14_000_000, save_start_ms: 100.0, save_end_ms: 105.0, load_start_ms: 105.0 + carry, load_end_ms: 115.0 + carry });
            point.samples.push(r);
        }
        points.push(point.clone());
        point.samples.iter_mut().for_each(|r| r.transfer = None);
        points.push(point);
        let table = transfer_table([(&backends[..], &points[..])]);
        assert_eq!(table.len(), 3, "{table:?}");
        assert!(table[2].starts_with("| llama | prefill 1 thread, decode 1 thread, via file |"), "{}", table[2]);
        // 35 ms from save to load for 14 MB: 400 MB/s, 17.5% of a 200 ms TTFT.
        assert!(table[2].ends_with("| 3 | 14.00 | 5.0 | 20.0 | 10.0 | 35.0 | 400 | 18 |"), "{}", table[2]);
        assert!(transfer_table([(&backends[..], &points[1..])]).is_empty());
    }
}
