//! The decisions on recorded inputs, as one test binary: every scenario dump in
//! `tests/scenarios/` planned as `fleetscaler plan` plans it, and every sequence in
//! `tests/replays/` replayed through the state file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod replays;
mod scenarios;
mod support;
