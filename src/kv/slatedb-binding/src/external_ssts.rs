//! external_ssts.rs — how a reader finds a branch's borrowed SSTs.
//!
//! A branch (sdb_clone) is a SlateDB clone: its manifest lists, per source
//! store ("external db"), the SSTs it still reads from there. SlateDB
//! 0.14.1's writer resolves those through the manifest, but its `DbReader`
//! looks for every SST under the reader's own path, so a reader of a branch
//! fails on the first borrowed SST. `ExternalSsts` wraps the reader's object
//! store and sends reads of exactly the borrowed SSTs (the manifest's
//! `external_dbs`, read through SlateDB's admin API when the reader opens)
//! to the source's path; everything else passes through unchanged. A store
//! that is no clone gets no wrapper.
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Where each borrowed SST of the store at `root` really is, from the
/// latest manifest (empty for a store that is no clone). Paths are built as
/// SlateDB's PathResolver builds them: ROOT/compacted/ULID.sst and
/// ROOT/wal/{id:020}.sst.
pub async fn borrowed(
    store: &Arc<dyn ObjectStore>,
    root: &Path,
) -> Result<HashMap<Path, Path>, String> {
    let admin = slatedb::admin::AdminBuilder::new(root.clone(), store.clone()).build();
    let manifest = admin
        .read_manifest(None)
        .await
        .map_err(|e| format!("reading the manifest: {e}"))?;
    let Some(manifest) = manifest else {
        return Ok(HashMap::new());
    };
    let json = serde_json::to_value(&manifest).map_err(|e| format!("reading the manifest: {e}"))?;
    let mut map = HashMap::new();
    let Some(dbs) = json.get("external_dbs").and_then(|v| v.as_array()) else {
        return Ok(map);
    };
    for db in dbs {
        let (Some(path), Some(ids)) = (
            db.get("path").and_then(|v| v.as_str()),
            db.get("sst_ids").and_then(|v| v.as_array()),
        ) else {
            return Err("reading the manifest: an external db without path or sst_ids".into());
        };
        for id in ids {
            let (here, there) = if let Some(ulid) = id.get("Compacted").and_then(|v| v.as_str()) {
                (
                    format!("{root}/compacted/{ulid}.sst"),
                    format!("{path}/compacted/{ulid}.sst"),
                )
            } else if let Some(wal) = id.get("Wal").and_then(|v| v.as_u64()) {
                (
                    format!("{root}/wal/{wal:020}.sst"),
                    format!("{path}/wal/{wal:020}.sst"),
                )
            } else {
                return Err(format!("reading the manifest: unknown SST id {id}"));
            };
            map.insert(Path::from(here), Path::from(there));
        }
    }
    Ok(map)
}

#[derive(Debug)]
pub struct ExternalSsts {
    inner: Arc<dyn ObjectStore>,
    map: HashMap<Path, Path>,
}

impl ExternalSsts {
    pub fn new(inner: Arc<dyn ObjectStore>, map: HashMap<Path, Path>) -> Self {
        ExternalSsts { inner, map }
    }

    fn at<'a>(&'a self, location: &'a Path) -> &'a Path {
        self.map.get(location).unwrap_or(location)
    }
}

impl fmt::Display for ExternalSsts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExternalSsts({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for ExternalSsts {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(self.at(location), options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(self.at(location), ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
