//! The HTTP layer: handlers parse and authorize, then call storage and the pure
//! crates. No SQL here.

pub mod audit;
pub mod extract;
mod gate;
mod invitations;
mod members;
mod organizations;
pub mod response;
pub mod router;
pub mod state;
pub mod system;

pub use router::router;
pub use state::AppState;
