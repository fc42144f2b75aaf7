//! TXT records, for the proof of a claimed domain: the system's resolver (hickory,
//! reading `/etc/resolv.conf`), or a stand-in given by the embedding program or a
//! test ([`TxtLookup`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a lookup may take.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Records read at most.
const MAX_RECORDS: usize = 50;

/// Looks up the TXT records of a name.
pub trait TxtLookup: Send + Sync + std::fmt::Debug {
    /// The records (each the concatenation of its strings); a name without records
    /// is an empty list; `Err` says the lookup could not be made.
    fn txt<'a>(
        &'a self,
        name: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<String>, String>> + Send + 'a>>;
}

/// The system's resolver.
#[derive(Debug, Default)]
pub struct SystemResolver;

impl TxtLookup for SystemResolver {
    fn txt<'a>(
        &'a self,
        name: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<String>, String>> + Send + 'a>>
    {
        Box::pin(async move {
            let resolver = hickory_resolver::Resolver::builder_tokio()
                .map_err(|e| format!("no resolver configuration: {e}"))?
                .build();
            let lookup = tokio::time::timeout(TIMEOUT, resolver.txt_lookup(format!("{name}.")))
                .await
                .map_err(|_| "the lookup timed out".to_owned())?;
            match lookup {
                Ok(records) => Ok(records
                    .iter()
                    .take(MAX_RECORDS)
                    .map(|txt| {
                        txt.txt_data()
                            .iter()
                            .map(|part| String::from_utf8_lossy(part).into_owned())
                            .collect::<String>()
                    })
                    .collect()),
                Err(e) if e.is_no_records_found() || e.is_nx_domain() => Ok(Vec::new()),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

/// Records held in memory: what tests and embedding programs publish.
#[derive(Debug, Default, Clone)]
pub struct StaticRecords(Arc<Mutex<HashMap<String, Vec<String>>>>);

impl StaticRecords {
    /// Publishes `value` under `name` (beside the others there).
    pub fn publish(&self, name: &str, value: &str) {
        if let Ok(mut records) = self.0.lock() {
            records
                .entry(name.to_ascii_lowercase())
                .or_default()
                .push(value.to_owned());
        }
    }
}

impl TxtLookup for StaticRecords {
    fn txt<'a>(
        &'a self,
        name: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<String>, String>> + Send + 'a>>
    {
        let found = self
            .0
            .lock()
            .map(|records| {
                records
                    .get(&name.to_ascii_lowercase())
                    .cloned()
                    .unwrap_or_default()
            })
            .map_err(|_| "the records are unreadable".to_owned());
        Box::pin(async move { found })
    }
}
