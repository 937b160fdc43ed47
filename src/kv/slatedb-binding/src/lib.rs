//! slatedb-binding — the C ABI over SlateDB 0.14.1 that moraine's kv layer
//! (src/kv/kv.c) is built on. Declarations for C live in ../sdb.h.
//!
//! This crate owns: resolving a store URL to an object store, opening a
//! SlateDB writer (`Db`) or reader (`DbReader`) with the one-byte segment
//! extractor, a tokio runtime per open handle (children share it through an
//! `Arc`, so it lives until the last of them is freed), and turning every
//! SlateDB error or Rust panic into a (code, message) pair. It knows nothing
//! of moraine's keys beyond "the first byte is the segment".
//!
//! Safety contract of every `extern "C"` fn: pointers are NULL or valid for
//! the lengths given, handles come from this crate and are not used after
//! they are freed, and one handle is not used by two threads at once except
//! `SdbDb` (see sdb.h and kv.h).
#![allow(clippy::missing_safety_doc)]

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, CStr};
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use bytes::Bytes;

mod external_ssts;
mod local_update;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, RetryConfig};
use slatedb::config::{
    CompactionWorkerOptions, CompactorOptions, DbReaderOptions, DurabilityLevel, FlushOptions,
    FlushType, GarbageCollectorDirectoryOptions, GarbageCollectorOptions, ObjectStoreCacheOptions,
    ReadOptions, ScanOptions, Settings, WriteOptions,
};
use slatedb::{
    CloseReason, Db, DbIterator, DbReader, DbSnapshot, DbTransaction, ErrorKind, IsolationLevel,
    KeyValue, PrefixExtractor, PrefixTarget, WriteBatch,
};
use tokio::runtime::Runtime;

// Result codes; keep in step with enum sdb_code in sdb.h.
const SDB_OK: i32 = 0;
const SDB_NOT_FOUND: i32 = 1;
const SDB_CONFLICT: i32 = 2;
const SDB_FENCED: i32 = 3;
const SDB_CLOSED: i32 = 4;
const SDB_UNAVAILABLE: i32 = 5;
const SDB_INVALID: i32 = 6;
const SDB_DATA: i32 = 7;
const SDB_INTERNAL: i32 = 8;
const SDB_NOMEM: i32 = 9;
const SDB_TIMEOUT: i32 = 10;

// enum sdb_extractor in sdb.h.
const EXTRACTOR_SEGMENT: u32 = 0;
const EXTRACTOR_NONE: u32 = 1;
const EXTRACTOR_OTHER: u32 = 2;

/// The name SlateDB persists in the manifest for moraine's extractor. A store
/// remembers it forever: changing it makes every existing store unopenable.
const SEGMENT_EXTRACTOR_NAME: &str = "moraine.subspace.v1";
/// Only for tests that must create a store with a foreign extractor.
const OTHER_EXTRACTOR_NAME: &str = "moraine.test.other.v1";

extern "C" {
    fn malloc(size: usize) -> *mut u8;
}

/// A failure on its way to C.
struct Fail {
    code: i32,
    msg: String,
}

type Res<T> = Result<T, Fail>;

fn fail(code: i32, msg: impl Into<String>) -> Fail {
    Fail {
        code,
        msg: msg.into(),
    }
}

fn invalid(msg: impl Into<String>) -> Fail {
    fail(SDB_INVALID, msg)
}

impl From<slatedb::Error> for Fail {
    fn from(e: slatedb::Error) -> Self {
        let code = match e.kind() {
            ErrorKind::Transaction => SDB_CONFLICT,
            ErrorKind::Closed(CloseReason::Fenced) => SDB_FENCED,
            ErrorKind::Closed(_) => SDB_CLOSED,
            ErrorKind::Unavailable => SDB_UNAVAILABLE,
            ErrorKind::Invalid => SDB_INVALID,
            ErrorKind::Data => SDB_DATA,
            _ => SDB_INTERNAL,
        };
        fail(code, e.to_string())
    }
}

/// Copies text into the caller's buffer, cut to cap-1 bytes, NUL-terminated.
unsafe fn put_msg(msg: *mut c_char, cap: usize, text: &str) {
    if msg.is_null() || cap == 0 {
        return;
    }
    let n = text.len().min(cap - 1);
    std::ptr::copy_nonoverlapping(text.as_ptr(), msg as *mut u8, n);
    *msg.add(n) = 0;
}

/// Runs one FFI call: catches panics and reports failures as (code, msg).
unsafe fn guard<F: FnOnce() -> Res<()>>(msg: *mut c_char, cap: usize, f: F) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => SDB_OK,
        Ok(Err(e)) => {
            put_msg(msg, cap, &e.msg);
            e.code
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            put_msg(msg, cap, &format!("panic in slatedb binding: {what}"));
            SDB_INTERNAL
        }
    }
}

/// Drops `value` with the runtime entered, so any SlateDB Drop that touches
/// tokio finds a runtime; the runtime itself is released after, outside its
/// own context (it shuts down when its last handle goes).
fn drop_in<T>(rt: Arc<Runtime>, value: T) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let guard = rt.enter();
        drop(value);
        drop(guard);
    }));
}

/// Fixed-length prefix extractor: the segment of a key is its first `len`
/// bytes (RFC-0024). Keys and scan prefixes shorter than that have none.
struct FixedPrefix {
    name: &'static str,
    len: usize,
}

impl PrefixExtractor for FixedPrefix {
    fn name(&self) -> &str {
        self.name
    }

    fn prefix_len(&self, target: &PrefixTarget) -> Option<usize> {
        let bytes = match target {
            PrefixTarget::Point(b) | PrefixTarget::Prefix(b) => b,
        };
        (bytes.len() >= self.len).then_some(self.len)
    }
}

fn extractor(which: u32) -> Res<Option<Arc<dyn PrefixExtractor>>> {
    match which {
        EXTRACTOR_SEGMENT => Ok(Some(Arc::new(FixedPrefix {
            name: SEGMENT_EXTRACTOR_NAME,
            len: 1,
        }))),
        EXTRACTOR_NONE => Ok(None),
        EXTRACTOR_OTHER => Ok(Some(Arc::new(FixedPrefix {
            name: OTHER_EXTRACTOR_NAME,
            len: 1,
        }))),
        _ => Err(invalid(format!("unknown extractor choice {which}"))),
    }
}

/// Named in-memory stores shared by every open of `memory://NAME` in this
/// process; they live until the process exits.
fn named_memory_store(name: &str) -> Arc<InMemory> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    let stores = STORES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = stores.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(name.to_string())
        .or_insert_with(|| Arc::new(InMemory::new()))
        .clone()
}

/// A store URL resolved: the object store SlateDB runs on, its root path, and
/// for cloud stores a second client of the same store that gives up quickly
/// (see `probe`).
struct Resolved {
    store: Arc<dyn ObjectStore>,
    path: Path,
    probe: Option<Arc<dyn ObjectStore>>,
}

/// Retries of the probe client: one, so that a wrong endpoint, credentials or
/// bucket surface as the store's own answer rather than after object_store's
/// default three minutes of retrying.
fn probe_retry(deadline: Option<Duration>) -> RetryConfig {
    RetryConfig {
        max_retries: 1,
        retry_timeout: deadline.unwrap_or(Duration::from_secs(10)),
        ..RetryConfig::default()
    }
}

/// Splits `scheme://BUCKET[/PREFIX]` into the bucket and the SlateDB root.
fn bucket_and_prefix<'a>(url: &str, rest: &'a str, what: &str) -> Res<(&'a str, Path)> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(invalid(format!("store url `{url}` names no {what}")));
    }
    Ok((bucket, Path::from(prefix.trim_matches('/'))))
}

/// The value of `key` in section `section` of an AWS shared config file
/// (INI: `[section]` headers, `key = value` lines, `#`/`;` comments).
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == key {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

/// object_store reads only the AWS_* variables; the AWS tools also read
/// static keys and region from a profile (AWS_PROFILE, default `default`) in
/// the shared files ~/.aws/credentials and ~/.aws/config (or the files named
/// by AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE). Variables win.
fn with_aws_profile(mut b: AmazonS3Builder) -> AmazonS3Builder {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
    let home = env("HOME").map(std::path::PathBuf::from);
    let file = |var: &str, name: &str| -> Option<String> {
        let path = env(var)
            .map(std::path::PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))?;
        std::fs::read_to_string(path).ok()
    };
    if env("AWS_ACCESS_KEY_ID").is_none() {
        if let Some(text) = file("AWS_SHARED_CREDENTIALS_FILE", "credentials") {
            let get = |k: &str| ini_value(&text, &profile, k);
            if let (Some(id), Some(secret)) =
                (get("aws_access_key_id"), get("aws_secret_access_key"))
            {
                b = b.with_access_key_id(id).with_secret_access_key(secret);
                if let Some(token) = get("aws_session_token") {
                    b = b.with_token(token);
                }
            }
        }
    }
    if let Some(text) = file("AWS_CONFIG_FILE", "config") {
        // ~/.aws/config names sections `profile NAME`, except `default`.
        let section = if profile == "default" {
            profile.clone()
        } else {
            format!("profile {profile}")
        };
        let get = |k: &str| ini_value(&text, &section, k);
        if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
            if let Some(region) = get("region") {
                b = b.with_region(region);
            }
        }
        if env("AWS_ENDPOINT").is_none() && env("AWS_ENDPOINT_URL").is_none() {
            if let Some(endpoint) = get("endpoint_url") {
                b = b.with_endpoint(endpoint);
            }
        }
    }
    b
}

/// Maps a store URL to an object store and the SlateDB root path inside it.
/// Cloud stores take endpoint and credentials from each cloud's standard
/// environment variables (kv.h lists them).
fn resolve_store(url: &str, deadline: Option<Duration>) -> Res<Resolved> {
    let local = |store: Arc<dyn ObjectStore>| Resolved {
        store,
        path: Path::from(""),
        probe: None,
    };
    if let Some(rest) = url.strip_prefix("file://") {
        if rest.is_empty() {
            return Err(invalid("file:// url names no folder"));
        }
        let mut dir = std::path::PathBuf::from(rest);
        if dir.is_relative() {
            let cwd = std::env::current_dir()
                .map_err(|e| fail(SDB_UNAVAILABLE, format!("cannot read cwd: {e}")))?;
            dir = cwd.join(dir);
        }
        std::fs::create_dir_all(&dir).map_err(|e| {
            fail(
                SDB_UNAVAILABLE,
                format!("cannot create {}: {e}", dir.display()),
            )
        })?;
        // A folder store lives in one object store rooted at "/", the
        // folder being its path in it (as a prefix is in a bucket): a clone
        // (sdb_clone) names its source's objects by that path, so a branch
        // finds them again whichever folder it is opened from. On disk
        // nothing changes: the objects are the same files. SlateDB prints
        // its paths and parses them again, which escapes characters an
        // absolute path keeps as they are ('~', '#', '%', ...): a folder
        // whose path does not survive that round trip is its own root
        // instead (path ""), as before branches existed, and cannot be
        // branched.
        let dir = std::fs::canonicalize(&dir).map_err(|e| {
            fail(
                SDB_UNAVAILABLE,
                format!("cannot open {}: {e}", dir.display()),
            )
        })?;
        let shared = Path::from_absolute_path(&dir).ok().filter(|p| {
            format!("/{p}") == dir.to_string_lossy() && Path::from(p.as_ref()) == *p
        });
        let (root, path) = match shared {
            Some(path) => (std::path::PathBuf::from("/"), path),
            None => (dir.clone(), Path::from("")),
        };
        // with_fsync: files and their parent directories are synced on every
        // write path, so an acknowledged write survives power loss
        // (object_store >= 0.14.2; standalone deletes are not synced).
        let fs = LocalFileSystem::new_with_prefix(&root)
            .map_err(|e| {
                fail(
                    SDB_UNAVAILABLE,
                    format!("cannot open {}: {e}", root.display()),
                )
            })?
            .with_fsync(true);
        return Ok(Resolved {
            store: Arc::new(local_update::LocalUpdateStore::new(fs)),
            path,
            probe: None,
        });
    }
    if let Some(name) = url.strip_prefix("memory://") {
        let store: Arc<dyn ObjectStore> = if name.is_empty() {
            Arc::new(InMemory::new())
        } else {
            named_memory_store(name)
        };
        return Ok(local(store));
    }
    // reqwest's TLS (rustls) has no crypto provider of its own in this
    // build: ring's, installed once for the process (aws-lc-rs, the other
    // choice, builds a large C library from source; see Cargo.toml)
    static TLS_PROVIDER: OnceLock<()> = OnceLock::new();
    TLS_PROVIDER.get_or_init(|| {
        // an Err means one is installed already: keep it
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    // Each cloud: a builder from the environment, built twice — SlateDB's
    // client with object_store's default retries, and the probe's.
    type Build = Box<dyn Fn(RetryConfig) -> Result<Arc<dyn ObjectStore>, object_store::Error>>;
    let (path, build): (Path, Build) = if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, path) = bucket_and_prefix(url, rest, "bucket")?;
        let b = with_aws_profile(AmazonS3Builder::from_env()).with_bucket_name(bucket);
        (
            path,
            Box::new(move |r| Ok(Arc::new(b.clone().with_retry(r).build()?) as _)),
        )
    } else if let Some(rest) = url.strip_prefix("gs://") {
        let (bucket, path) = bucket_and_prefix(url, rest, "bucket")?;
        let b = GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket);
        (
            path,
            Box::new(move |r| Ok(Arc::new(b.clone().with_retry(r).build()?) as _)),
        )
    } else if let Some(rest) = url.strip_prefix("az://") {
        let (container, path) = bucket_and_prefix(url, rest, "container")?;
        let b = MicrosoftAzureBuilder::from_env().with_container_name(container);
        (
            path,
            Box::new(move |r| Ok(Arc::new(b.clone().with_retry(r).build()?) as _)),
        )
    } else {
        return Err(invalid(format!(
            "unsupported store url `{url}`: expected file://, memory://, s3://, gs:// or az://"
        )));
    };
    let configure = |e: object_store::Error| {
        invalid(format!(
            "cannot configure {url}: {}",
            one_line(&e.to_string())
        ))
    };
    Ok(Resolved {
        store: build(RetryConfig::default()).map_err(configure)?,
        probe: Some(build(probe_retry(deadline)).map_err(configure)?),
        path,
    })
}

/// Error texts of the HTTP stack span lines; moraine reports one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An error and its causes on one line: object_store's text stops at
/// "error sending request", the reason (refused connection, a certificate
/// from an unknown issuer, ...) is in its source chain.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        cause = c.source();
    }
    one_line(&text)
}

/// One LIST under the store's root through the quick-failing client, before
/// SlateDB opens: SlateDB retries a failing object store forever, so without
/// this a wrong endpoint, credentials or bucket would only ever show as the
/// open deadline passing, with no reason.
async fn probe(store: &Arc<dyn ObjectStore>, path: &Path, url: &str) -> Res<()> {
    match store.list_with_delimiter(Some(path)).await {
        Ok(_) => Ok(()),
        Err(e) => Err(fail(
            SDB_UNAVAILABLE,
            format!(
                "the object store refused {url}: {}",
                with_causes(&e)
            ),
        )),
    }
}

/// SlateDB's object-store cache on a local folder: SST parts read from the
/// object store are kept there (up to 1 GiB here, not SlateDB's 16 GiB
/// default, which could fill a small disk), so a restart or a read of an old
/// snapshot reads them locally. Writes are not cached: every commit writes a
/// WAL object, and a local copy of each would only slow the commit path.
fn cache_options(dir: &str) -> Res<ObjectStoreCacheOptions> {
    if dir.is_empty() {
        return Err(invalid("empty cache folder"));
    }
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).map_err(|e| {
        fail(
            SDB_UNAVAILABLE,
            format!("cannot create {}: {e}", dir.display()),
        )
    })?;
    Ok(ObjectStoreCacheOptions {
        root_folder: Some(dir),
        max_cache_size_bytes: Some(1 << 30),
        cache_puts: false,
        ..ObjectStoreCacheOptions::default()
    })
}

/// A reader cannot create a store: report a missing one as SDB_NOT_FOUND
/// rather than SlateDB's "failed to find latest ... manifest" data error.
async fn require_store(store: &Arc<dyn ObjectStore>, path: &Path, url: &str) -> Res<()> {
    let manifests = path.clone().join("manifest");
    let found = match store.list_with_delimiter(Some(&manifests)).await {
        Ok(listing) => !listing.objects.is_empty(),
        Err(object_store::Error::NotFound { .. }) => false,
        Err(e) => {
            return Err(fail(
                SDB_UNAVAILABLE,
                format!("cannot list {manifests}: {e}"),
            ));
        }
    };
    if !found {
        return Err(fail(SDB_NOT_FOUND, format!("no SlateDB store at {url}")));
    }
    Ok(())
}

/// How a reader handle was opened; kept to rebuild the reader on refresh.
struct ReaderArgs {
    store: Arc<dyn ObjectStore>,
    path: Path,
    extractor: Option<Arc<dyn PrefixExtractor>>,
    options: DbReaderOptions,
}

impl ReaderArgs {
    async fn build(&self) -> Res<DbReader> {
        // a branch's borrowed SSTs, found where they are (external_ssts.rs);
        // read again at every (re)build, so a refresh follows the manifest
        let borrowed = external_ssts::borrowed(&self.store, &self.path)
            .await
            .map_err(|e| fail(SDB_DATA, e))?;
        let store: Arc<dyn ObjectStore> = if borrowed.is_empty() {
            self.store.clone()
        } else {
            Arc::new(external_ssts::ExternalSsts::new(self.store.clone(), borrowed))
        };
        let mut b = DbReader::builder(self.path.clone(), store)
            .with_options(self.options.clone());
        if let Some(x) = &self.extractor {
            b = b.with_segment_extractor(x.clone());
        }
        Ok(b.build().await?)
    }
}

/// A `DbReader` handle: the current reader, swapped whole by a refresh.
struct ReaderSlot {
    current: RwLock<Arc<DbReader>>,
    args: ReaderArgs,
}

impl ReaderSlot {
    fn get(&self) -> Arc<DbReader> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

enum Store {
    Writer(Db),
    Reader(ReaderSlot),
}

pub struct SdbDb {
    rt: Arc<Runtime>,
    store: Store,
    deadline: Option<Duration>,
    /// The object store and path the handle was opened on: for listing its
    /// objects (usage) and for the admin client that submits compactions.
    objects: Arc<dyn ObjectStore>,
    path: Path,
}

/// Runs `fut` on `rt`, failing with SDB_TIMEOUT when `deadline` passes first:
/// a store that does not answer (full disk, object store down) becomes an
/// error in bounded time instead of a hang.
fn within<T, E, F>(rt: &Runtime, deadline: Option<Duration>, what: &str, fut: F) -> Res<T>
where
    E: Into<Fail>,
    F: std::future::Future<Output = Result<T, E>>,
{
    match deadline {
        None => rt.block_on(fut).map_err(Into::into),
        Some(d) => match rt.block_on(async { tokio::time::timeout(d, fut).await }) {
            Ok(r) => r.map_err(Into::into),
            Err(_) => Err(fail(
                SDB_TIMEOUT,
                format!("{what} did not complete within {} ms", d.as_millis()),
            )),
        },
    }
}

pub struct SdbIter {
    rt: Arc<Runtime>,
    it: Option<DbIterator>, // None: an empty range, or every entry fetched
    end: Bound<Bytes>,      // the scan's upper bound: a seek at or past it ends the scan
    cur: Option<KeyValue>,  // the entry the caller's pointers point into
    // Entries fetched ahead: one trip into the runtime fetches up to `batch`
    // entries / ITER_BATCH_BYTES, because a trip per entry cost more in
    // thread wake-ups than the read itself (a cold start read a million
    // records at ~8 us each). A failure met after some entries is kept
    // until those are handed out.
    ahead: VecDeque<KeyValue>,
    failed: Option<Fail>,
    // Entries the next fetch asks for: ITER_FIRST_BATCH at the start and
    // after a seek, doubling per fetch up to ITER_BATCH_ENTRIES, so that a
    // short scan, or one that hops from seek to seek, does not read a full
    // batch it then drops.
    batch: usize,
    fetched_to: Option<Bytes>, // the last key fetched: where the SlateDB iterator stands
}

const ITER_BATCH_ENTRIES: usize = 1024;
const ITER_FIRST_BATCH: usize = 16;
const ITER_BATCH_BYTES: usize = 1 << 20;

pub struct SdbSnapshot {
    rt: Arc<Runtime>,
    snap: Arc<DbSnapshot>,
}

pub struct SdbTxn {
    rt: Arc<Runtime>,
    txn: DbTransaction,
}

pub struct SdbBatch {
    batch: WriteBatch,
}

#[repr(C)]
pub struct SdbOpenArgs {
    url: *const c_char,
    read_only: u32,
    extractor: u32,
    wal_flush_ms: u32,
    poll_ms: u32,
    deadline_ms: u32,
    cache_dir: *const c_char,
    l0_sst_bytes: u32,
    gc_interval_ms: u32,
    gc_min_age_ms: u32,
}

/// Writer reads see only durable data: a batch still waiting for its WAL
/// flush is invisible, so nothing is observed that a crash could undo.
fn durable_read() -> ReadOptions {
    ReadOptions::new().with_durability_filter(DurabilityLevel::Remote)
}

/// Scans read SST blocks SCAN_READ_AHEAD bytes at a time, two fetches in
/// flight: SlateDB's default fetches one 4 KiB block per object-store read,
/// a GET per block on a cloud store. The iterator reads only the blocks its
/// range overlaps, so a short scan still reads little.
const SCAN_READ_AHEAD: usize = 256 << 10;

fn scan_options() -> ScanOptions {
    ScanOptions::new()
        .with_read_ahead_bytes(SCAN_READ_AHEAD)
        .with_max_fetch_tasks(2)
}

fn durable_scan() -> ScanOptions {
    scan_options().with_durability_filter(DurabilityLevel::Remote)
}

fn durable_write() -> WriteOptions {
    WriteOptions {
        await_durable: true,
        ..WriteOptions::default()
    }
}

/// SlateDB's log lines on stderr, as moraine's own: "moraine: slatedb:
/// LEVEL: message". Background work (compaction, garbage collection, WAL
/// and memtable flushes) fails only here. MORAINE_SLATEDB_LOG picks the
/// level (error, warn, info, debug; default warn).
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::max_level()
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            eprintln!(
                "moraine: slatedb: {}: {}",
                r.level().as_str().to_lowercase(),
                one_line(&r.args().to_string())
            );
        }
    }
    fn flush(&self) {}
}

fn install_log() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let level = match std::env::var("MORAINE_SLATEDB_LOG").as_deref() {
            Ok("error") => log::LevelFilter::Error,
            Ok("info") => log::LevelFilter::Info,
            Ok("debug") => log::LevelFilter::Debug,
            Ok("off") => log::LevelFilter::Off,
            _ => log::LevelFilter::Warn,
        };
        if log::set_logger(&StderrLog).is_ok() {
            log::set_max_level(level);
        }
    });
}

fn new_runtime() -> Res<Arc<Runtime>> {
    install_log();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("kv-slatedb")
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(|e| fail(SDB_UNAVAILABLE, format!("cannot start tokio runtime: {e}")))
}

/// A handle used by one thread at a time (iterator, batch, transaction, ...).
unsafe fn handle<'a, T>(p: *mut T) -> Res<&'a mut T> {
    p.as_mut().ok_or_else(|| invalid("null handle"))
}

/// A handle that may be shared by threads: only ever borrowed immutably.
unsafe fn shared<'a, T>(p: *const T) -> Res<&'a T> {
    p.as_ref().ok_or_else(|| invalid("null handle"))
}

unsafe fn bytes_arg<'a>(p: *const u8, n: usize) -> Res<&'a [u8]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(invalid("null buffer with non-zero length"));
    }
    Ok(std::slice::from_raw_parts(p, n))
}

/// SlateDB asserts on these limits; refuse them here instead of panicking.
unsafe fn key_arg<'a>(p: *const u8, n: usize) -> Res<&'a [u8]> {
    if n == 0 {
        return Err(invalid("empty key"));
    }
    if n > u16::MAX as usize {
        return Err(invalid(format!(
            "key of {n} bytes exceeds the 65535-byte limit"
        )));
    }
    bytes_arg(p, n)
}

unsafe fn value_arg<'a>(p: *const u8, n: usize) -> Res<&'a [u8]> {
    if n > u32::MAX as usize {
        return Err(invalid(format!(
            "value of {n} bytes exceeds the 4 GiB limit"
        )));
    }
    bytes_arg(p, n)
}

/// Hands a get result to C as a malloc'd copy, or SDB_NOT_FOUND.
unsafe fn give_value(got: Option<Bytes>, val: *mut *mut u8, vlen: *mut usize) -> Res<()> {
    if val.is_null() || vlen.is_null() {
        return Err(invalid("null output pointer"));
    }
    *val = std::ptr::null_mut();
    *vlen = 0;
    let Some(b) = got else {
        return Err(fail(SDB_NOT_FOUND, "key not found"));
    };
    let p = malloc(b.len().max(1));
    if p.is_null() {
        return Err(fail(
            SDB_NOMEM,
            format!("cannot allocate {} bytes", b.len()),
        ));
    }
    std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len());
    *val = p;
    *vlen = b.len();
    Ok(())
}

/// [start, end) as SlateDB bounds, or None when the range is empty.
unsafe fn range_arg(
    start: *const u8,
    slen: usize,
    end: *const u8,
    elen: usize,
) -> Res<Option<(Bound<Bytes>, Bound<Bytes>)>> {
    let lo = if start.is_null() || slen == 0 {
        Bound::Unbounded
    } else {
        Bound::Included(Bytes::copy_from_slice(bytes_arg(start, slen)?))
    };
    let hi = if end.is_null() {
        Bound::Unbounded
    } else if elen == 0 {
        return Ok(None);
    } else {
        Bound::Excluded(Bytes::copy_from_slice(bytes_arg(end, elen)?))
    };
    if let (Bound::Included(a), Bound::Excluded(b)) = (&lo, &hi) {
        if a >= b {
            return Ok(None);
        }
    }
    Ok(Some((lo, hi)))
}

fn writer(db: &SdbDb) -> Res<&Db> {
    match &db.store {
        Store::Writer(d) => Ok(d),
        Store::Reader(_) => Err(invalid("store was opened read-only")),
    }
}

unsafe fn give_iter(
    rt: &Arc<Runtime>,
    it: Option<(DbIterator, Bound<Bytes>)>,
    out: *mut *mut SdbIter,
) -> Res<()> {
    let out = handle(out)?;
    let (it, end) = match it {
        Some((it, end)) => (Some(it), end),
        None => (None, Bound::Unbounded),
    };
    *out = Box::into_raw(Box::new(SdbIter {
        rt: rt.clone(),
        it,
        end,
        cur: None,
        ahead: VecDeque::new(),
        failed: None,
        batch: ITER_FIRST_BATCH,
        fetched_to: None,
    }));
    Ok(())
}

/// Fills it.ahead with the next batch of entries (none when the range is
/// done); it.it becomes None once the range is exhausted.
fn iter_fetch(it: &mut SdbIter) {
    let Some(inner) = it.it.as_mut() else {
        return;
    };
    let ahead = &mut it.ahead;
    let want = it.batch;
    it.batch = (it.batch * 2).min(ITER_BATCH_ENTRIES);
    let res: Result<bool, slatedb::Error> = it.rt.block_on(async {
        let mut bytes = 0;
        while ahead.len() < want && bytes < ITER_BATCH_BYTES {
            match inner.next().await? {
                Some(kv) => {
                    bytes += kv.key.len() + kv.value.len();
                    ahead.push_back(kv);
                }
                None => return Ok(true),
            }
        }
        Ok(false)
    });
    if let Some(last) = ahead.back() {
        it.fetched_to = Some(last.key.clone());
    }
    match res {
        Ok(false) => {}
        Ok(true) => it.it = None,
        Err(e) => {
            it.failed = Some(e.into());
            it.it = None;
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn sdb_open(
    args: *const SdbOpenArgs,
    out: *mut *mut SdbDb,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let a = args
            .as_ref()
            .ok_or_else(|| invalid("null open arguments"))?;
        let out = handle(out)?;
        *out = std::ptr::null_mut();
        if a.url.is_null() {
            return Err(invalid("null store url"));
        }
        let url = CStr::from_ptr(a.url)
            .to_str()
            .map_err(|_| invalid("store url is not UTF-8"))?;
        let deadline = (a.deadline_ms > 0).then(|| Duration::from_millis(a.deadline_ms as u64));
        let cache = if a.cache_dir.is_null() {
            ObjectStoreCacheOptions::default()
        } else {
            let dir = CStr::from_ptr(a.cache_dir)
                .to_str()
                .map_err(|_| invalid("cache folder is not UTF-8"))?;
            cache_options(dir)?
        };
        let Resolved {
            store,
            path,
            probe: quick,
        } = resolve_store(url, deadline)?;
        let (objects, root) = (store.clone(), path.clone());
        let extractor = extractor(a.extractor)?;
        let rt = new_runtime()?;
        if let Some(quick) = &quick {
            within(&rt, deadline, "opening the store", probe(quick, &path, url))?;
        }
        let kind = if a.read_only != 0 {
            let mut options = DbReaderOptions::default();
            options.object_store_cache_options = cache;
            if a.poll_ms > 0 {
                let poll = Duration::from_millis(a.poll_ms as u64);
                options.manifest_poll_interval = poll;
                options.checkpoint_lifetime = options.checkpoint_lifetime.max(poll * 4);
            }
            let args = ReaderArgs {
                store,
                path,
                extractor,
                options,
            };
            within(
                &rt,
                deadline,
                "opening the store",
                require_store(&args.store, &args.path, url),
            )?;
            let reader = within(&rt, deadline, "opening the store", args.build())?;
            Store::Reader(ReaderSlot {
                current: RwLock::new(Arc::new(reader)),
                args,
            })
        } else {
            let mut settings = Settings::default();
            settings.object_store_cache_options = cache;
            if a.wal_flush_ms > 0 {
                settings.flush_interval = Some(Duration::from_millis(a.wal_flush_ms as u64));
            }
            if a.l0_sst_bytes > 0 {
                settings.l0_sst_size_bytes = a.l0_sst_bytes as usize;
            }
            settings.l0_max_ssts = L0_MAX_SSTS;
            settings.garbage_collector_options = Some(gc_options(a.gc_interval_ms, a.gc_min_age_ms));
            // resolve_store gives a probe client to cloud stores only
            settings.compactor_options = Some(compactor_options(quick.is_none()));
            let mut b = Db::builder(path, store).with_settings(settings);
            if let Some(x) = extractor {
                b = b.with_segment_extractor(x);
            }
            Store::Writer(within(&rt, deadline, "opening the store", b.build())?)
        };
        *out = Box::into_raw(Box::new(SdbDb {
            rt,
            store: kind,
            deadline,
            objects,
            path: root,
        }));
        Ok(())
    })
}

/// The folders directly under a store url, '\n'-terminated names in one
/// malloc'd buffer: one LIST with a delimiter, through the quick-failing
/// client for object stores. Opens no store.
#[no_mangle]
pub unsafe extern "C" fn sdb_list_folders(
    url: *const c_char,
    deadline_ms: u32,
    out: *mut *mut u8,
    len: *mut usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        if url.is_null() {
            return Err(invalid("null store url"));
        }
        let url = CStr::from_ptr(url)
            .to_str()
            .map_err(|_| invalid("store url is not UTF-8"))?;
        let deadline = (deadline_ms > 0).then(|| Duration::from_millis(deadline_ms as u64));
        let Resolved { store, path, probe } = resolve_store(url, deadline)?;
        let client = probe.unwrap_or(store);
        let rt = new_runtime()?;
        let listed = within(&rt, deadline, "listing the store", async {
            client.list_with_delimiter(Some(&path)).await.map_err(|e| {
                fail(
                    SDB_UNAVAILABLE,
                    format!("cannot list {url}: {}", one_line(&e.to_string())),
                )
            })
        })?;
        let mut text = String::new();
        for p in &listed.common_prefixes {
            if let Some(name) = p.filename() {
                text.push_str(name);
                text.push('\n');
            }
        }
        give_value(Some(Bytes::from(text)), out, len)
    })
}

/// Scheme and bucket (container) of a cloud store url; every folder store
/// shares the file system's one object store ("file://"); None for the
/// rest (memory:// stores are private to one name).
fn object_store_of(url: &str) -> Option<String> {
    if url.starts_with("file://") {
        return Some("file://".to_string());
    }
    for scheme in ["s3://", "gs://", "az://"] {
        if let Some(rest) = url.strip_prefix(scheme) {
            let bucket = rest.split_once('/').map(|(b, _)| b).unwrap_or(rest);
            return Some(format!("{scheme}{bucket}"));
        }
    }
    None
}

/// A zero-copy clone of the store at `src` (its latest durable state) as a
/// new store at `dst`: SlateDB's clone, whose manifest references the
/// source's SSTs (pinned there by a checkpoint) and copies only its WAL.
/// Both must be in one object store (folders, or one bucket); `dst` must
/// hold no store yet. The source is not opened as a writer, so a server
/// writing it goes on.
#[no_mangle]
pub unsafe extern "C" fn sdb_clone(
    src: *const c_char,
    dst: *const c_char,
    deadline_ms: u32,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        if src.is_null() || dst.is_null() {
            return Err(invalid("null store url"));
        }
        let src_url = CStr::from_ptr(src)
            .to_str()
            .map_err(|_| invalid("store url is not UTF-8"))?;
        let dst_url = CStr::from_ptr(dst)
            .to_str()
            .map_err(|_| invalid("store url is not UTF-8"))?;
        let (Some(a), Some(b)) = (object_store_of(src_url), object_store_of(dst_url)) else {
            return Err(invalid(format!(
                "cannot branch {src_url} into {dst_url}: only folder (file://) and s3://, gs://, az:// stores branch"
            )));
        };
        if a != b {
            return Err(invalid(format!(
                "cannot branch {src_url} into {dst_url}: a branch shares its source's objects, so both must be in one object store ({a} and {b} differ)"
            )));
        }
        let deadline = (deadline_ms > 0).then(|| Duration::from_millis(deadline_ms as u64));
        let source = resolve_store(src_url, deadline)?;
        let target = resolve_store(dst_url, deadline)?;
        if a == "file://" && (source.path.as_ref().is_empty() || target.path.as_ref().is_empty()) {
            return Err(invalid(format!(
                "cannot branch {src_url} into {dst_url}: a folder whose path holds a character such as '%', '#' or '~' cannot be branched"
            )));
        }
        if source.path == target.path {
            return Err(invalid(format!("cannot branch {src_url} into itself")));
        }
        let rt = new_runtime()?;
        if let Some(quick) = &source.probe {
            within(&rt, deadline, "opening the store", probe(quick, &source.path, src_url))?;
        }
        within(
            &rt,
            deadline,
            "opening the store",
            require_store(&source.store, &source.path, src_url),
        )?;
        let taken = rt.block_on(require_store(&source.store, &target.path, dst_url));
        if taken.is_ok() {
            return Err(invalid(format!("{dst_url} already holds a store")));
        }
        let admin = slatedb::admin::AdminBuilder::new(target.path.clone(), source.store.clone()).build();
        within(
            &rt,
            deadline,
            "branching the store",
            admin
                .create_clone_builder_from_source(slatedb::admin::CloneSourceSpec::new(source.path.clone()))
                .build(),
        )?;
        // SlateDB copies the WAL SSTs its source's manifest knows of; a
        // writer serving the source records newer ones in its manifest only
        // when its memtable next becomes an L0 SST. Those durable commits
        // are the source's state too: copy them on (the branch's writer
        // replays every WAL SST it finds after the manifest's).
        let known = within(&rt, deadline, "branching the store", admin.read_manifest(None))?;
        let next = known
            .as_ref()
            .and_then(|m| serde_json::to_value(m).ok())
            .and_then(|v| v.get("next_wal_sst_id").and_then(|n| n.as_u64()))
            .ok_or_else(|| fail(SDB_DATA, format!("{dst_url}: the branch's manifest names no next WAL SST")))?;
        let store = source.store.clone();
        within(&rt, deadline, "branching the store", async move {
            let mut id = next;
            loop {
                let from = Path::from(format!("{}/wal/{:020}.sst", source.path, id));
                let to = Path::from(format!("{}/wal/{:020}.sst", target.path, id));
                match store.copy(&from, &to).await {
                    Ok(()) => id += 1,
                    Err(object_store::Error::NotFound { .. }) => return Ok::<_, Fail>(()),
                    Err(e) => {
                        return Err(fail(
                            SDB_UNAVAILABLE,
                            format!("copying {from}: {}", one_line(&e.to_string())),
                        ))
                    }
                }
            }
        })?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_close(db: *mut SdbDb, msg: *mut c_char, cap: usize) -> i32 {
    if db.is_null() {
        return SDB_OK;
    }
    let db = Box::from_raw(db);
    let code = guard(msg, cap, || {
        match &db.store {
            Store::Writer(d) => db.rt.block_on(d.close())?,
            Store::Reader(r) => db.rt.block_on(r.get().close())?,
        }
        Ok(())
    });
    let SdbDb { rt, store, .. } = *db;
    drop_in(rt, store);
    code
}

#[no_mangle]
pub unsafe extern "C" fn sdb_flush(db: *mut SdbDb, msg: *mut c_char, cap: usize) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let options = FlushOptions {
            flush_type: FlushType::MemTable,
        };
        db.rt.block_on(writer(db)?.flush_with_options(options))?;
        Ok(())
    })
}

/// Writer: flushes the WAL buffer (everything written so far, including a
/// write whose caller gave up at its deadline) within the open's deadline.
#[no_mangle]
pub unsafe extern "C" fn sdb_sync(db: *mut SdbDb, msg: *mut c_char, cap: usize) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let d = writer(db)?;
        let wal = FlushOptions {
            flush_type: FlushType::Wal,
        };
        within(&db.rt, db.deadline, "the store sync", d.flush_with_options(wal))?;
        Ok(())
    })
}

/// Readers only: opens a fresh DbReader on the latest manifest and WAL, then
/// closes the old one. On failure the old reader stays in place.
#[no_mangle]
pub unsafe extern "C" fn sdb_refresh(db: *mut SdbDb, msg: *mut c_char, cap: usize) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let Store::Reader(slot) = &db.store else {
            return Err(invalid("refresh is for read-only handles"));
        };
        let fresh = Arc::new(db.rt.block_on(slot.args.build())?);
        let old = {
            let mut cur = slot.current.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *cur, fresh)
        };
        db.rt.block_on(old.close())?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_get(
    db: *mut SdbDb,
    key: *const u8,
    klen: usize,
    val: *mut *mut u8,
    vlen: *mut usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let key = key_arg(key, klen)?;
        let got = match &db.store {
            Store::Writer(d) => db.rt.block_on(d.get_with_options(key, &durable_read()))?,
            Store::Reader(r) => db.rt.block_on(r.get().get(key))?,
        };
        give_value(got, val, vlen)
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_scan(
    db: *mut SdbDb,
    start: *const u8,
    slen: usize,
    end: *const u8,
    elen: usize,
    out: *mut *mut SdbIter,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let it = match range_arg(start, slen, end, elen)? {
            None => None,
            Some(range) => {
                let end = range.1.clone();
                let it = match &db.store {
                    Store::Writer(d) => db
                        .rt
                        .block_on(d.scan_with_options(range, &durable_scan()))?,
                    Store::Reader(r) => db.rt.block_on(r.get().scan_with_options(range, &scan_options()))?,
                };
                Some((it, end))
            }
        };
        give_iter(&db.rt, it, out)
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_iter_next(
    it: *mut SdbIter,
    key: *mut *const u8,
    klen: *mut usize,
    val: *mut *const u8,
    vlen: *mut usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let it = handle(it)?;
        if key.is_null() || klen.is_null() || val.is_null() || vlen.is_null() {
            return Err(invalid("null output pointer"));
        }
        it.cur = None;
        if it.ahead.is_empty() {
            iter_fetch(it);
        }
        let Some(kv) = it.ahead.pop_front() else {
            if let Some(f) = it.failed.take() {
                return Err(f);
            }
            return Err(fail(SDB_NOT_FOUND, "end of range"));
        };
        let kv = it.cur.insert(kv);
        *key = kv.key.as_ptr();
        *klen = kv.key.len();
        *val = kv.value.as_ptr();
        *vlen = kv.value.len();
        Ok(())
    })
}

/// Moves it forward so that the next sdb_iter_next returns the first entry
/// at or after `key`. Entries fetched ahead below it are dropped (their
/// count goes to *dropped: the store read them); past them the SlateDB
/// iterator seeks. A key at or below the last entry returned changes
/// nothing; one at or past the scan's end ends it.
#[no_mangle]
pub unsafe extern "C" fn sdb_iter_seek(
    it: *mut SdbIter,
    key: *const u8,
    klen: usize,
    dropped: *mut usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let it = handle(it)?;
        let target = key_arg(key, klen)?;
        let dropped = dropped
            .as_mut()
            .ok_or_else(|| invalid("null output pointer"))?;
        *dropped = 0;
        it.cur = None;
        while let Some(front) = it.ahead.front() {
            if front.key.as_ref() >= target {
                return Ok(());
            }
            it.ahead.pop_front();
            *dropped += 1;
        }
        if it.failed.is_some() {
            return Ok(()); // handed out by the next sdb_iter_next
        }
        let past_end = match &it.end {
            Bound::Excluded(e) => target >= e.as_ref(),
            _ => false,
        };
        if it.fetched_to.as_ref().is_some_and(|f| target <= f.as_ref()) {
            return Ok(()); // already past it
        }
        if past_end {
            it.it = None;
        } else if let Some(inner) = it.it.as_mut() {
            // every entry fetched so far is below target: the SlateDB
            // iterator stands before it, as its seek requires
            if let Err(e) = it.rt.block_on(inner.seek(target)) {
                it.failed = Some(e.into());
                it.it = None;
            }
        }
        it.batch = ITER_FIRST_BATCH;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_iter_free(it: *mut SdbIter) {
    if it.is_null() {
        return;
    }
    let SdbIter { rt, it, cur, ahead, .. } = *Box::from_raw(it);
    drop_in(rt, (it, cur, ahead));
}

#[no_mangle]
pub extern "C" fn sdb_batch_new() -> *mut SdbBatch {
    Box::into_raw(Box::new(SdbBatch {
        batch: WriteBatch::new(),
    }))
}

#[no_mangle]
pub unsafe extern "C" fn sdb_batch_put(
    b: *mut SdbBatch,
    key: *const u8,
    klen: usize,
    val: *const u8,
    vlen: usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let b = handle(b)?;
        let (k, v) = (key_arg(key, klen)?, value_arg(val, vlen)?);
        b.batch.put(k, v);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_batch_delete(
    b: *mut SdbBatch,
    key: *const u8,
    klen: usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let b = handle(b)?;
        b.batch.delete(key_arg(key, klen)?);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_batch_free(b: *mut SdbBatch) {
    if !b.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(b))));
    }
}

#[no_mangle]
pub unsafe extern "C" fn sdb_write(
    db: *mut SdbDb,
    b: *const SdbBatch,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let b = b.as_ref().ok_or_else(|| invalid("null batch"))?;
        let d = writer(db)?;
        // Durable at once: the batch goes into the WAL buffer and the WAL is
        // flushed now, instead of waiting for the flush timer's next tick.
        let queued = WriteOptions {
            await_durable: false,
            ..WriteOptions::default()
        };
        let wal = FlushOptions {
            flush_type: FlushType::Wal,
        };
        within(&db.rt, db.deadline, "the store write", async {
            d.write_with_options(b.batch.clone(), &queued).await?;
            d.flush_with_options(wal).await
        })?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_snapshot_open(
    db: *mut SdbDb,
    out: *mut *mut SdbSnapshot,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let out = handle(out)?;
        let snap = db.rt.block_on(writer(db)?.snapshot())?;
        *out = Box::into_raw(Box::new(SdbSnapshot {
            rt: db.rt.clone(),
            snap,
        }));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_snapshot_get(
    s: *mut SdbSnapshot,
    key: *const u8,
    klen: usize,
    val: *mut *mut u8,
    vlen: *mut usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let s = handle(s)?;
        let key = key_arg(key, klen)?;
        let got =
            s.rt.block_on(s.snap.get_with_options(key, &durable_read()))?;
        give_value(got, val, vlen)
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_snapshot_scan(
    s: *mut SdbSnapshot,
    start: *const u8,
    slen: usize,
    end: *const u8,
    elen: usize,
    out: *mut *mut SdbIter,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let s = handle(s)?;
        let it = match range_arg(start, slen, end, elen)? {
            None => None,
            Some(range) => {
                let end = range.1.clone();
                Some((s.rt.block_on(s.snap.scan_with_options(range, &durable_scan()))?, end))
            }
        };
        give_iter(&s.rt, it, out)
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_snapshot_free(s: *mut SdbSnapshot) {
    if s.is_null() {
        return;
    }
    let SdbSnapshot { rt, snap } = *Box::from_raw(s);
    drop_in(rt, snap);
}

/// Snapshot isolation: reads see the state at begin (plus the transaction's
/// own writes); commit fails with a conflict if another write committed a
/// key this transaction writes after it began.
#[no_mangle]
pub unsafe extern "C" fn sdb_txn_begin(
    db: *mut SdbDb,
    out: *mut *mut SdbTxn,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let out = handle(out)?;
        let txn = db
            .rt
            .block_on(writer(db)?.begin(IsolationLevel::Snapshot))?;
        *out = Box::into_raw(Box::new(SdbTxn {
            rt: db.rt.clone(),
            txn,
        }));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_txn_get(
    t: *mut SdbTxn,
    key: *const u8,
    klen: usize,
    val: *mut *mut u8,
    vlen: *mut usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let t = handle(t)?;
        let key = key_arg(key, klen)?;
        let got =
            t.rt.block_on(t.txn.get_with_options(key, &durable_read()))?;
        give_value(got, val, vlen)
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_txn_scan(
    t: *mut SdbTxn,
    start: *const u8,
    slen: usize,
    end: *const u8,
    elen: usize,
    out: *mut *mut SdbIter,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let t = handle(t)?;
        let it = match range_arg(start, slen, end, elen)? {
            None => None,
            Some(range) => {
                let end = range.1.clone();
                Some((t.rt.block_on(t.txn.scan_with_options(range, &durable_scan()))?, end))
            }
        };
        give_iter(&t.rt, it, out)
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_txn_put(
    t: *mut SdbTxn,
    key: *const u8,
    klen: usize,
    val: *const u8,
    vlen: usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let t = handle(t)?;
        t.txn.put(key_arg(key, klen)?, value_arg(val, vlen)?)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_txn_delete(
    t: *mut SdbTxn,
    key: *const u8,
    klen: usize,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let t = handle(t)?;
        t.txn.delete(key_arg(key, klen)?)?;
        Ok(())
    })
}

/// Commits durably (or fails) and frees the transaction either way.
#[no_mangle]
pub unsafe extern "C" fn sdb_txn_commit(t: *mut SdbTxn, msg: *mut c_char, cap: usize) -> i32 {
    if t.is_null() {
        return guard(msg, cap, || Err(invalid("null transaction")));
    }
    let SdbTxn { rt, txn } = *Box::from_raw(t);
    // commit consumes the transaction inside the runtime.
    guard(msg, cap, || {
        rt.block_on(txn.commit_with_options(&durable_write()))?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sdb_txn_rollback(t: *mut SdbTxn) {
    if t.is_null() {
        return;
    }
    let SdbTxn { rt, txn } = *Box::from_raw(t);
    drop_in(rt, txn);
}

/// How often, on a local store (`file://`, `memory://`), the compactor looks
/// for L0 SSTs to merge and its worker for merges to run. A memtable flush
/// waits while L0 is full, and so does closing the store (it flushes the
/// memtable): at SlateDB's 5 s + 5 s, a stop after a burst of bulk commits
/// waited 9-12 s for merges. On an object store each poll is requests (at
/// 1 s an idle server made +5 GETs and +3 LISTs a second, nearly twice its
/// requests), so object stores keep SlateDB's interval.
const LOCAL_COMPACTION_POLL: Duration = Duration::from_secs(1);

/// L0 SSTs allowed across the whole key space before memtable flushes wait
/// for a merge. Every flush writes one L0 SST per segment it holds keys of
/// (a DuckLake commit touches several), so SlateDB's default of 8 filled in
/// two flushes; what bounds a read is the per-key limit
/// (`l0_max_ssts_per_key`, default 8), which stays.
const L0_MAX_SSTS: usize = 64;

/// SlateDB's size-tiered compactor, tuned for a catalog: merge as soon as a
/// tree has two runs, and take runs up to 64 times the size of the newest
/// into one merge. A catalog's trees are small (megabytes), so each memtable
/// flush is soon merged with the whole tree down to its last run, which is
/// where tombstones and the values they shadow are dropped: records a
/// DuckLake expiry or flush deleted leave the store within a few flushes,
/// not when the tree has grown fourfold (SlateDB's default tiers). A tree
/// more than 64 flushes large merges by tiers, so reclaiming there is slower.
fn compactor_options(local: bool) -> CompactorOptions {
    let mut o = CompactorOptions::default();
    if local {
        o.poll_interval = LOCAL_COMPACTION_POLL;
        o.worker = Some(CompactionWorkerOptions {
            compactions_poll_interval: LOCAL_COMPACTION_POLL,
            ..CompactionWorkerOptions::default()
        });
    }
    for (k, v) in [
        ("min_compaction_sources", "2"),
        ("max_compaction_sources", "16"),
        ("include_size_threshold", "64"),
    ] {
        o.scheduler_options.insert(k.to_string(), v.to_string());
    }
    o
}

/// SlateDB's garbage collector, on purpose: manifests, WAL objects, compacted
/// SSTs and compaction records older than `min_age_ms` that nothing references
/// go every `interval_ms` (0: SlateDB's defaults, 60 s and 5 min). WAL fence
/// objects stay (SlateDB's own default: deleting them can lose a write).
fn gc_options(interval_ms: u32, min_age_ms: u32) -> GarbageCollectorOptions {
    let mut dir = GarbageCollectorDirectoryOptions::default();
    if interval_ms > 0 {
        dir.interval = Some(Duration::from_millis(interval_ms as u64));
    }
    if min_age_ms > 0 {
        dir.min_age = Duration::from_millis(min_age_ms as u64);
    }
    GarbageCollectorOptions {
        manifest_options: Some(dir),
        wal_options: Some(dir),
        compacted_options: Some(dir),
        compactions_options: Some(dir),
        ..GarbageCollectorOptions::default()
    }
}

/// The objects under the handle's path and their total bytes (a LIST per
/// folder), leaving out the top-level folder `skip_top` (NULL: none): what
/// this store costs in its object store now.
#[no_mangle]
pub unsafe extern "C" fn sdb_usage(
    db: *mut SdbDb,
    skip_top: *const c_char,
    objects: *mut u64,
    bytes: *mut u64,
    msg: *mut c_char,
    cap: usize,
) -> i32 {
    guard(msg, cap, || {
        let db = shared(db)?;
        let objects = handle(objects)?;
        let bytes = handle(bytes)?;
        let skip = if skip_top.is_null() {
            None
        } else {
            Some(
                CStr::from_ptr(skip_top)
                    .to_str()
                    .map_err(|_| invalid("folder name is not UTF-8"))?,
            )
        };
        let (n, b) = within(&db.rt, db.deadline, "listing the store", async {
            let (mut n, mut b) = (0u64, 0u64);
            let mut folders = vec![db.path.clone()];
            while let Some(folder) = folders.pop() {
                let listed = db.objects.list_with_delimiter(Some(&folder)).await.map_err(|e| {
                    fail(
                        SDB_UNAVAILABLE,
                        format!("cannot list the store: {}", one_line(&e.to_string())),
                    )
                })?;
                n += listed.objects.len() as u64;
                b += listed.objects.iter().map(|o| o.size as u64).sum::<u64>();
                let top = folder == db.path;
                folders.extend(
                    listed
                        .common_prefixes
                        .into_iter()
                        .filter(|p| !(top && skip.is_some() && p.filename() == skip)),
                );
            }
            Ok::<_, Fail>((n, b))
        })?;
        *objects = n;
        *bytes = b;
        Ok(())
    })
}
