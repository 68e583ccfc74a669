//! Every seed that ever failed (`cell/sim/failed-seeds.txt`) replays clean.

use paros_sim::RunOptions;
use paros_sim::check::Claim;
use paros_sim::sweep::{self, SeedResult};

#[test]
fn every_seed_that_ever_failed_replays_clean() {
    let list = include_str!("../failed-seeds.txt");
    let seeds = sweep::parse_seed_list(list).expect("the list parses");
    assert!(seeds.contains(&6482), "the list keeps seed 6482 (issue 8)");
    for seed in seeds {
        let report = match sweep::run_caught(seed, RunOptions::default()) {
            SeedResult::Ran(r) => r,
            SeedResult::Panicked(msg) => panic!("seed {seed} panicked: {msg}"),
        };
        assert_eq!(report.claims.violations(), 0, "seed {seed}: {:#?}", report.claims.details);
        assert!(report.claims.count(Claim::Converges).reached > 0, "seed {seed} ran to a converged end");
    }
}

#[test]
fn a_seed_list_refuses_a_line_that_is_not_a_seed() {
    assert_eq!(sweep::parse_seed_list("1\n# note\n\n2 # why\n"), Ok(vec![1, 2]));
    assert!(sweep::parse_seed_list("1\nseven\n").unwrap_err().contains("line 2"));
}
