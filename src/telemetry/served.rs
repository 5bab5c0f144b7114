//! What `/metrics` serves, for the OTLP export of the same metrics: one definition of every
//! family, label and help text, whichever way they are sent.

use crate::hub::FleetView;

/// The Prometheus exposition of the fleet now, as `GET /metrics` answers it.
pub fn exposition(view: &FleetView) -> String {
    crate::server::metrics_exposition(view)
}
