//! The simulated cluster's HTTPS API: routing, discovery, the handlers for reads, writes,
//! patches, subresources and watches, and the wire forms of errors.

pub mod audit;
pub mod discovery;
pub mod handler;
pub mod openapi;
pub mod patch;
pub mod query;
pub mod resources;
pub mod router;
pub mod selector;
pub mod server;
pub mod status;
pub mod subresources;
pub mod table;
pub mod validation;
pub mod watch;
