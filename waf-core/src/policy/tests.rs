//! The precedence table, row by row, and whole-policy behaviour through `Transaction`.

use super::rules::Skips;
use super::*;

const ALL: Skips = Skips {
    bans: true,
    rate_limits: true,
    crs: true,
    scoring: true,
};
const NONE: Skips = Skips {
    bans: false,
    rate_limits: false,
    crs: false,
    scoring: false,
};

#[test]
fn precedence_row_1_allow_that_skips_bans_beats_a_ban() {
    assert_eq!(
        decide(true, Some(RuleDecision::Allow(ALL)), true),
        Decision::Allow
    );
    assert_eq!(
        decide(true, Some(RuleDecision::Allow(ALL)), false),
        Decision::Allow
    );
}

#[test]
fn precedence_row_2_a_ban_beats_everything_else() {
    for rule in [
        None,
        Some(RuleDecision::Block),
        Some(RuleDecision::Challenge),
        Some(RuleDecision::Allow(NONE)),
    ] {
        for rate in [false, true] {
            assert_eq!(decide(true, rule, rate), Decision::Ban, "{rule:?} {rate}");
        }
    }
}

#[test]
fn precedence_row_3_block_beats_a_rate_limit() {
    assert_eq!(
        decide(false, Some(RuleDecision::Block), true),
        Decision::Block
    );
    assert_eq!(
        decide(false, Some(RuleDecision::Block), false),
        Decision::Block
    );
}

#[test]
fn precedence_row_4_challenge_beats_a_rate_limit() {
    assert_eq!(
        decide(false, Some(RuleDecision::Challenge), true),
        Decision::Challenge
    );
    assert_eq!(
        decide(false, Some(RuleDecision::Challenge), false),
        Decision::Challenge
    );
}

#[test]
fn precedence_row_5_allow_that_skips_rate_limits_beats_one() {
    assert_eq!(
        decide(false, Some(RuleDecision::Allow(ALL)), true),
        Decision::Allow
    );
}

#[test]
fn precedence_row_6_allow_that_keeps_rate_limits_loses_to_one() {
    assert_eq!(
        decide(false, Some(RuleDecision::Allow(NONE)), true),
        Decision::RateLimit
    );
}

#[test]
fn precedence_row_7_a_rate_limit_alone_decides() {
    assert_eq!(decide(false, None, true), Decision::RateLimit);
}

#[test]
fn precedence_row_8_allow_alone() {
    assert_eq!(
        decide(false, Some(RuleDecision::Allow(NONE)), false),
        Decision::Allow
    );
}

#[test]
fn precedence_row_9_nothing() {
    assert_eq!(decide(false, None, false), Decision::Continue);
}
