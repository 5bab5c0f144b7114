//! `fleetscaler dump`: one cluster's state as `fleetscaler plan -s` reads it, in one
//! command, read only. It lists exactly what the hub reads, found by the hub's own discovery
//! (both Machine APIs by their full names, at the versions the hub chose), the storage kinds,
//! and the infrastructure templates the node groups point at, into one `List`.
//!
//! `kinds` says what is listed, `list` lists one kind page by page, `write` writes the
//! `List` as it goes, `output` makes the file appear only once whole. Progress, notes and
//! warnings go to stderr; the dump alone to stdout or the file.

mod kinds;
mod list;
mod output;
mod write;

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use serde_json::Value;

use self::kinds::Source;
use self::list::ListError;
use self::output::{Counting, Pending};
pub use self::write::Format;
use self::write::{ListWriter, empty_list, refused_list};
use crate::cluster::cache::discovery::discover;
use crate::cluster::client::{ClientError, connect};
use crate::cluster::error::{CallError, Category};
use crate::cluster::kubeconfig::{kubeconfig_place, load_kubeconfig, require_context, server_of};
use crate::model::{Projector, ScalableResource};

#[derive(clap::Args, Debug, Clone)]
pub struct DumpArgs {
    /// The kubeconfig to read (default: KUBECONFIG, else ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Where to write the dump (default: stdout). The file appears only once the dump is
    /// whole, readable by its owner alone.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// yaml or json (default: json for an --output ending in .json, else yaml).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// How long each request to the cluster may take (Go duration: 30s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "30s",
          value_parser = super::status::parse_timeout)]
    pub request_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("no kubeconfig: give --kubeconfig FILE or set KUBECONFIG ({0})")]
    NoKubeconfig(String),
    #[error("{place} has no current context: name one with --context")]
    NoContext { place: String },
    #[error("cannot discover what the cluster serves: {0}")]
    Discovery(#[source] CallError),
    #[error("cannot list {what}: {source}; no dump written")]
    List {
        what: String,
        #[source]
        source: CallError,
    },
    #[error("cannot write the dump to {place}: {source}")]
    Write {
        place: String,
        #[source]
        source: io::Error,
    },
}

/// What was dumped, for the last words on stderr and the comments at the end of the dump.
#[derive(Debug, Default)]
struct Summary {
    objects: usize,
    /// `kind count` for every kind listed, empty ones included.
    listed: Vec<String>,
    empty: usize,
    not_served: Vec<String>,
    forbidden: Vec<String>,
    bytes: u64,
}

/// The cluster to dump: its client, and how to name it.
struct Target {
    client: Client,
    context: String,
    server: String,
}

/// What to dump and how, once the cluster is found.
struct Work {
    target: Target,
    sources: Vec<Source>,
    not_served: Vec<String>,
    format: Format,
    deadline: Duration,
}

pub async fn run(args: &DumpArgs, stdout: &mut impl Write) -> Result<(), DumpError> {
    let started = Instant::now();
    let work = prepare(args).await?;
    let summary = match &args.output {
        None => work.write_to(BufWriter::new(stdout), "stdout").await?,
        Some(path) => to_file(path, work).await?,
    };
    report(&summary, args.output.as_deref(), started);
    Ok(())
}

/// Connects, and finds what to list: the kinds the hub reads, at the versions it reads
/// them, then the storage kinds.
async fn prepare(args: &DumpArgs) -> Result<Work, DumpError> {
    let target = connect_to(args).await?;
    eprintln!(
        "fleetscaler dump: context {} at {}",
        target.context, target.server
    );
    let deadline = args.request_timeout;
    let served = discover(&target.client, deadline)
        .await
        .map_err(DumpError::Discovery)?;
    for w in &served.warnings {
        eprintln!("warning: {w}");
    }
    let mut sources = kinds::of_served(&served);
    let (storage, no_storage) = kinds::storage(&target.client, &sources, deadline)
        .await
        .map_err(DumpError::Discovery)?;
    sources.extend(storage);
    let mut not_served = kinds::not_served(&served);
    not_served.extend(no_storage);
    Ok(Work {
        target,
        sources,
        not_served,
        format: args
            .format
            .unwrap_or_else(|| format_of(args.output.as_deref())),
        deadline,
    })
}

impl Work {
    async fn write_to(self, out: impl Write, place: &str) -> Result<Summary, DumpError> {
        let header = header(&self.target);
        let dumper = Dumper::start(out, self.format, &header, place, self.not_served)?;
        dumper
            .dump(&self.target.client, &self.sources, self.deadline)
            .await
    }
}

/// The dump written to `path`, which appears only if it is whole.
async fn to_file(path: &Path, work: Work) -> Result<Summary, DumpError> {
    let place = path.display().to_string();
    let write_error = |source| DumpError::Write {
        place: place.clone(),
        source,
    };
    let (pending, file) = Pending::create(path).map_err(write_error)?;
    match work.write_to(file, &place).await {
        Ok(summary) => {
            pending.commit().map_err(write_error)?;
            Ok(summary)
        }
        Err(e) => {
            pending.abandon();
            Err(e)
        }
    }
}

/// The client for the context asked for (or the kubeconfig's current one).
async fn connect_to(args: &DumpArgs) -> Result<Target, DumpError> {
    let file = args.kubeconfig.as_deref();
    let kubeconfig = load_kubeconfig(file, &[]).map_err(|e| match e {
        ClientError::DefaultKubeconfig { source } => DumpError::NoKubeconfig(source.to_string()),
        other => other.into(),
    })?;
    let place = || kubeconfig_place(file, &[]);
    let context = args
        .context
        .clone()
        .or_else(|| kubeconfig.current_context.clone())
        .filter(|c| !c.is_empty())
        .ok_or_else(|| DumpError::NoContext { place: place() })?;
    require_context(&kubeconfig, &context, place)?;
    let server = server_of(&kubeconfig, &context).unwrap_or_else(|| "its server".into());
    let client = connect(kubeconfig, &context, args.request_timeout).await?;
    Ok(Target {
        client,
        context,
        server,
    })
}

/// JSON for a file named `*.json`, YAML otherwise (and on stdout).
fn format_of(output: Option<&Path>) -> Format {
    let json = output
        .and_then(Path::extension)
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if json { Format::Json } else { Format::Yaml }
}

fn header(target: &Target) -> Vec<String> {
    vec![
        format!(
            "fleetscaler dump of context {:?} ({}) at {:.0}, fleetscaler {}",
            target.context,
            target.server,
            jiff::Timestamp::now(),
            env!("CARGO_PKG_VERSION")
        ),
        "Read it with `fleetscaler plan -s FILE`. A kind listed empty is a typed empty list \
         (`kind: JobList`, `items: []`):"
            .into(),
        "the cluster has none of it, which is not the same as a kind left out.".into(),
    ]
}

/// The last words on stderr: what was written where, and what was left out.
fn report(summary: &Summary, output: Option<&Path>, started: Instant) {
    if !summary.not_served.is_empty() {
        eprintln!(
            "not served by the cluster (left out, nothing to read): {}",
            summary.not_served.join(", ")
        );
    }
    if !summary.forbidden.is_empty() {
        eprintln!(
            "warning: not allowed to list {}: left out; plan reads the dump without them",
            summary.forbidden.join(", ")
        );
    }
    let place = output.map_or("stdout".to_string(), |p| p.display().to_string());
    eprintln!(
        "wrote {} objects of {} kinds ({} listed empty) to {place} in {:.1}s",
        summary.objects,
        summary.listed.len(),
        summary.empty,
        started.elapsed().as_secs_f64()
    );
    let max = crate::files::DUMP.max();
    if summary.bytes > max {
        eprintln!(
            "warning: the dump is {} bytes, more than plan reads ({max}): set {} to read it",
            summary.bytes,
            crate::files::DUMP.env
        );
    }
}

/// Lists kind after kind into one `List`.
struct Dumper<W: Write> {
    writer: ListWriter<Counting<W>>,
    /// Where the dump goes, as write errors name it.
    place: String,
    /// The node groups listed so far, for the infrastructure templates they point at.
    scalables: Vec<ScalableResource>,
    projector: Projector,
    summary: Summary,
}

impl<W: Write> Dumper<W> {
    fn start(
        out: W,
        format: Format,
        header: &[String],
        place: &str,
        not_served: Vec<String>,
    ) -> Result<Self, DumpError> {
        let writer = ListWriter::start(Counting::new(out), format, header).map_err(|source| {
            DumpError::Write {
                place: place.to_string(),
                source,
            }
        })?;
        Ok(Dumper {
            writer,
            place: place.to_string(),
            scalables: Vec::new(),
            projector: Projector::default(),
            summary: Summary {
                not_served,
                ..Summary::default()
            },
        })
    }

    async fn dump(
        mut self,
        client: &Client,
        sources: &[Source],
        deadline: Duration,
    ) -> Result<Summary, DumpError> {
        for source in sources {
            self.kind(client, source, deadline).await?;
        }
        self.templates(client, deadline).await?;
        let footer = self.footer();
        let place = self.place.clone();
        let counted = self
            .writer
            .finish(&footer)
            .map_err(|source| DumpError::Write { place, source })?;
        self.summary.bytes = counted.bytes;
        Ok(self.summary)
    }

    fn write_error(&self, source: io::Error) -> DumpError {
        DumpError::Write {
            place: self.place.clone(),
            source,
        }
    }

    /// One kind, written as it is listed; a kind listed empty is written as a typed empty
    /// list, and one the cluster refuses is left out with a warning.
    async fn kind(
        &mut self,
        client: &Client,
        source: &Source,
        deadline: Duration,
    ) -> Result<(), DumpError> {
        let started = Instant::now();
        let listed = {
            let (writer, scalables, p) =
                (&mut self.writer, &mut self.scalables, &mut self.projector);
            let mut each = |value: Value| -> io::Result<()> {
                writer.item(&value)?;
                if let Some((api, kind)) = source.scalable
                    && let Ok(r) = ScalableResource::from_json(api, kind, value, p)
                {
                    scalables.push(r);
                }
                Ok(())
            };
            list::list(client, source, deadline, &mut each).await
        };
        match listed {
            Ok(count) => self.listed(source, count, started),
            Err(ListError::Skipped(e)) => self.skipped(source, &e),
            Err(ListError::Failed(e)) => Err(DumpError::List {
                what: source.what.clone(),
                source: e,
            }),
            Err(ListError::Write(e)) => Err(self.write_error(e)),
        }
    }

    fn listed(&mut self, source: &Source, count: usize, started: Instant) -> Result<(), DumpError> {
        if count == 0 {
            let r = &source.resource;
            let empty = empty_list(&r.api_version, &r.kind);
            self.writer.item(&empty).map_err(|e| self.write_error(e))?;
            self.summary.empty += 1;
        }
        self.summary.objects += count;
        self.summary.listed.push(format!("{} {count}", source.what));
        progress(&source.what, &count.to_string(), started);
        Ok(())
    }

    /// A kind refused at its first page: forbidden (a warning, and the kind marked unread
    /// in the dump), or gone since discovery.
    fn skipped(&mut self, source: &Source, e: &CallError) -> Result<(), DumpError> {
        let what = source.what.clone();
        if e.category() == Category::Forbidden {
            progress(&what, "forbidden", Instant::now());
            let why = refusal(e);
            eprintln!("warning: not allowed to list {what} ({why}): left out of the dump");
            let r = &source.resource;
            let marked = refused_list(&r.api_version, &r.kind, &format!("forbidden ({why})"));
            self.writer.item(&marked).map_err(|e| self.write_error(e))?;
            self.summary.forbidden.push(what);
        } else {
            progress(&what, "not served", Instant::now());
            self.summary.not_served.push(what);
        }
        Ok(())
    }

    /// The infrastructure templates the node groups point at (Cluster API's scale from
    /// zero reads their capacity), read one by one as the hub reads them.
    async fn templates(&mut self, client: &Client, deadline: Duration) -> Result<(), DumpError> {
        if !self
            .scalables
            .iter()
            .any(|r| r.infrastructure_ref.is_some())
        {
            return Ok(());
        }
        let started = Instant::now();
        let read = crate::cluster::runner::infra::get_once(
            client.clone(),
            deadline,
            self.scalables.iter(),
        );
        let (objects, problems) = read.await;
        for object in &objects {
            self.writer.item(object).map_err(|e| self.write_error(e))?;
        }
        self.summary.objects += objects.len();
        let what = "infrastructure templates";
        self.summary
            .listed
            .push(format!("{what} {}", objects.len()));
        progress(what, &objects.len().to_string(), started);
        for p in problems {
            eprintln!("warning: {p}; left out of the dump");
        }
        Ok(())
    }

    fn footer(&self) -> Vec<String> {
        let s = &self.summary;
        let mut lines = vec![format!("listed: {}", s.listed.join(", "))];
        if !s.not_served.is_empty() {
            lines.push(format!("not served: {}", s.not_served.join(", ")));
        }
        if !s.forbidden.is_empty() {
            lines.push(format!("not allowed, left out: {}", s.forbidden.join(", ")));
        }
        lines
    }
}

/// What the API server said when it refused: its own message, without the Status around it.
fn refusal(e: &CallError) -> String {
    match e {
        CallError::Api {
            source: kube::Error::Api(status),
            ..
        } => format!("{}: {}", status.code, status.message),
        other => other.to_string(),
    }
}

/// One line of progress on stderr: the kind, how many (or why none), how long it took.
fn progress(what: &str, count: &str, started: Instant) {
    eprintln!(
        "  {what:<54} {count:>10} {:>6.1}s",
        started.elapsed().as_secs_f64()
    );
}
