//! Figures only a quiet machine shows. The CI tests of these analyses hold
//! them to what each run measured of itself (the bottleneck's demand, the
//! lock it cannot beat), which is true on any machine, however fast or
//! busy; the bands below are what a machine with nothing else to do gives,
//! and what those tests asserted before. `bash bench/quiet.sh` runs them one
//! at a time; bench/README.md records what they gave. Ignored otherwise.

use crate::capacity::{cpu_bottleneck_analysis, lock_bottleneck_analysis};
use crate::open_capacity::{levels, open_cpu_search};

#[test]
#[ignore = "a quiet machine's figure: bash bench/quiet.sh"]
fn the_cpu_bottleneck_saturates_near_its_250_per_second_in_at_most_9_steady_levels() {
    let (_tb, _, _, run) = cpu_bottleneck_analysis("quiet-cap-cpu");
    let x = run["analysis"]["max_throughput_rps"].as_f64().unwrap();
    // The testbed's own work per request (HTTP, the db call) takes a few
    // percent off the bottleneck's 250/s.
    assert!((200.0..=262.5).contains(&x), "max throughput {x}");
    let levels = run["levels"].as_array().unwrap();
    // A sweep in steps of 10 up to 1.5 N* is 19 levels; use at most half.
    assert!(levels.len() <= 9, "{} levels", levels.len());
    assert!(levels.iter().all(|l| l["steady_state"] == true));
}

#[test]
#[ignore = "a quiet machine's figure: bash bench/quiet.sh"]
fn the_lock_bound_analysis_reaches_within_a_fifth_of_its_200_per_second() {
    let (_tb, _, _, run) = lock_bottleneck_analysis("quiet-cap-lock");
    let x = run["analysis"]["max_throughput_rps"].as_f64().unwrap();
    assert!((160.0..=210.0).contains(&x), "max throughput {x}");
}

#[test]
#[ignore = "a quiet machine's figure: bash bench/quiet.sh"]
fn the_open_search_passes_within_a_fifth_of_one_web_workers_250_per_second() {
    let (_tb, _, _, run) = open_cpu_search("quiet-open-cap");
    let pass = run["analysis"]["max_passing_rate_rps"].as_f64().unwrap();
    assert!((200.0..=275.0).contains(&pass), "{pass}\n{}", levels(&run));
}
