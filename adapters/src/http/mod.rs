//! The HTTP layer: handlers parse and authorize, then call storage and the pure
//! crates. No SQL here.

mod admin;
pub mod audit;
mod catalog;
pub mod extract;
mod gate;
mod governance;
mod invitations;
pub mod listener;
mod members;
mod organizations;
pub mod response;
pub mod router;
mod rules;
pub mod state;
pub mod system;
mod validate;

pub use router::router;
pub use state::AppState;
