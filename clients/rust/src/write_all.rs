//! [`Writer::write_all`]: a stream of batches pipelined through a writer's window, each batch's
//! position reported as it is acknowledged.
//!
//! The decision of each step — send the batch in hand, wait for a report, take the next batch,
//! or both at once — is a sans-IO function of the window and the input (unit-tested here);
//! [`WriteAll`] only carries it out.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;

use crate::service::JournalService;
use crate::writer::{Writer, WriterError, Written};

impl<S> Writer<S>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    /// Writes a stream of batches, pipelined through the writer's window, and yields each
    /// batch's [`Written`] position in order as it is acknowledged.
    ///
    /// A batch is [submitted](Self::submit) while the window has room for it (at most
    /// [`batches_in_flight_max`](crate::WriterConfig::batches_in_flight_max) batches and
    /// [`bytes_in_flight_max`](crate::WriterConfig::bytes_in_flight_max) bytes in flight, a
    /// lone batch over the bytes bound alone), and at most one more batch is taken from
    /// `batches` while it waits for room, so the memory held is bounded whatever the stream's
    /// length. Reports are yielded as soon as they are known, also while `batches` is slow to
    /// give its next batch.
    ///
    /// The stream ends when `batches` has ended and every batch is reported, or with the first
    /// error in position order (a batch's failed report, or a batch the writer refused to take —
    /// e.g. [`WriterError::NotClaimed`], [`WriterError::EmptyBatch`] — once every batch before
    /// it is reported), which is its last item: a batch taken and not yet submitted is not
    /// written, and the reports of later batches still in flight are left for
    /// [`next_report`](Self::next_report). Batches submitted before `write_all` are reported by
    /// it too, first. The writer must have claimed the journal. For an iterator of batches, pass
    /// `futures_util::stream::iter(batches)`.
    pub fn write_all<'a, B>(&'a mut self, batches: B) -> WriteAll<'a, S, B>
    where
        B: Stream<Item = Vec<Bytes>> + Send + 'a,
    {
        WriteAll::new(self, batches)
    }
}

/// What [`WriteAll`] does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PipelineStep {
    /// Submit the batch in hand.
    Submit,
    /// Wait for the next report: the batch in hand does not fit, or the input is over.
    AwaitReport,
    /// Wait for the next batch: nothing is in flight.
    AwaitBatch,
    /// Wait for whichever comes first, a report or the next batch.
    AwaitEither,
    /// Yield the refusal of the batch in hand: every batch before it is reported.
    Refuse,
    /// The input is over and every batch is reported.
    Done,
}

/// The next step, from the bytes of the batch in hand (if one is), whether the input is over,
/// whether the writer refused a batch, the batches in flight, and whether the writer has room
/// for the batch in hand.
///
/// Reports come in position order: a batch the writer refuses to take is reported after every
/// batch before it, and nothing after it is taken.
///
/// At most one batch is held outside the window, so what `write_all` keeps is bounded by the
/// window's bounds plus one batch. A batch goes when the window has room for it, or when the
/// window is empty (so a batch over the bytes bound still goes alone, and a writer that cannot
/// take it says why).
pub(crate) fn pipeline_step(
    held: Option<u64>,
    input_over: bool,
    refused: bool,
    in_flight: usize,
    has_room: impl Fn(u64) -> bool,
) -> PipelineStep {
    if refused {
        return if in_flight > 0 { PipelineStep::AwaitReport } else { PipelineStep::Refuse };
    }
    match held {
        Some(bytes) if in_flight == 0 || has_room(bytes) => PipelineStep::Submit,
        Some(_) => PipelineStep::AwaitReport,
        None if !input_over && in_flight == 0 => PipelineStep::AwaitBatch,
        None if !input_over => PipelineStep::AwaitEither,
        None if in_flight > 0 => PipelineStep::AwaitReport,
        None => PipelineStep::Done,
    }
}

/// What the pipeline's step futures own and hand back.
struct Pipeline<'a, S: JournalService + 'static, B> {
    writer: &'a mut Writer<S>,
    batches: Pin<Box<B>>,
    held: Option<Vec<Bytes>>,
    input_over: bool,
    refused: Option<WriterError>,
}

type StepFuture<'a, S, B> =
    Pin<Box<dyn Future<Output = (Box<Pipeline<'a, S, B>>, Option<Result<Written, WriterError>>)> + Send + 'a>>;

/// The stream [`Writer::write_all`] returns: each batch's [`Written`] position, in order, as it
/// is acknowledged; after the first error, nothing more. See [`Writer::write_all`].
#[must_use = "a stream writes nothing unless it is polled"]
pub struct WriteAll<'a, S: JournalService + 'static, B> {
    pipeline: Option<Box<Pipeline<'a, S, B>>>,
    step: Option<StepFuture<'a, S, B>>,
    over: bool,
}

impl<S: JournalService + 'static, B> std::fmt::Debug for WriteAll<'_, S, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteAll").field("stepping", &self.step.is_some()).field("over", &self.over).finish()
    }
}

impl<'a, S, B> WriteAll<'a, S, B>
where
    S: JournalService + 'static,
    S::Journal: 'static,
    B: Stream<Item = Vec<Bytes>> + Send + 'a,
{
    pub(crate) fn new(writer: &'a mut Writer<S>, batches: B) -> Self {
        let pipeline = Pipeline { writer, batches: Box::pin(batches), held: None, input_over: false, refused: None };
        WriteAll { pipeline: Some(Box::new(pipeline)), step: None, over: false }
    }
}

impl<S, B> Pipeline<'_, S, B>
where
    S: JournalService + 'static,
    S::Journal: 'static,
    B: Stream<Item = Vec<Bytes>> + Send,
{
    /// Carries out steps until there is a report to yield, or nothing more.
    async fn next_report(&mut self) -> Option<Result<Written, WriterError>> {
        loop {
            let held = self.held.as_ref().map(|batch| batch.iter().map(|r| r.len() as u64).sum());
            let writer = &*self.writer;
            let refused = self.refused.is_some();
            match pipeline_step(held, self.input_over, refused, writer.in_flight(), |bytes| writer.has_room(bytes)) {
                PipelineStep::Submit => {
                    let batch = self.held.take().unwrap_or_default();
                    if let Err(e) = self.writer.submit(batch) {
                        self.refused = Some(e);
                    }
                }
                PipelineStep::Refuse => return self.refused.take().map(Err),
                PipelineStep::AwaitReport => {
                    if let Some((_, report)) = self.writer.next_report().await {
                        return Some(report);
                    }
                }
                PipelineStep::AwaitBatch => {
                    let batch = std::future::poll_fn(|cx| self.batches.as_mut().poll_next(cx)).await;
                    self.take(batch);
                }
                PipelineStep::AwaitEither => {
                    // The writer's next_report is cancel-safe: dropping it when a batch comes
                    // first loses no answer.
                    let first = {
                        let batches = &mut self.batches;
                        let mut report = std::pin::pin!(self.writer.next_report());
                        std::future::poll_fn(|cx| {
                            if let Poll::Ready(report) = report.as_mut().poll(cx) {
                                return Poll::Ready(Ok(report));
                            }
                            batches.as_mut().poll_next(cx).map(Err)
                        })
                        .await
                    };
                    match first {
                        Ok(Some((_, report))) => return Some(report),
                        Ok(None) => {}
                        Err(batch) => self.take(batch),
                    }
                }
                PipelineStep::Done => return None,
            }
        }
    }

    fn take(&mut self, batch: Option<Vec<Bytes>>) {
        match batch {
            Some(batch) => self.held = Some(batch),
            None => self.input_over = true,
        }
    }
}

impl<'a, S, B> Stream for WriteAll<'a, S, B>
where
    S: JournalService + 'static,
    S::Journal: 'static,
    B: Stream<Item = Vec<Bytes>> + Send + 'a,
{
    type Item = Result<Written, WriterError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.over {
            return Poll::Ready(None);
        }
        let step = match &mut this.step {
            Some(step) => step,
            None => {
                let Some(mut pipeline) = this.pipeline.take() else {
                    unreachable!("the pipeline is the stream's or its step's")
                };
                this.step.insert(Box::pin(async move {
                    let report = pipeline.next_report().await;
                    (pipeline, report)
                }))
            }
        };
        let Poll::Ready((pipeline, report)) = step.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        this.step = None;
        this.pipeline = Some(pipeline);
        this.over = !matches!(report, Some(Ok(_)));
        Poll::Ready(report)
    }
}

#[cfg(test)]
mod tests {
    use super::{PipelineStep, pipeline_step};

    #[test]
    fn a_batch_in_hand_goes_when_the_window_has_room_or_is_empty() {
        assert_eq!(pipeline_step(Some(10), false, false, 3, |_| true), PipelineStep::Submit);
        assert_eq!(
            pipeline_step(Some(10), false, false, 3, |_| false),
            PipelineStep::AwaitReport,
            "a full window waits"
        );
        assert_eq!(
            pipeline_step(Some(10), true, false, 0, |_| false),
            PipelineStep::Submit,
            "an empty window takes any batch (or the writer says why not)"
        );
    }

    #[test]
    fn without_a_batch_in_hand_the_pipeline_waits_for_input_and_reports_alike() {
        assert_eq!(pipeline_step(None, false, false, 0, |_| true), PipelineStep::AwaitBatch);
        assert_eq!(
            pipeline_step(None, false, false, 2, |_| true),
            PipelineStep::AwaitEither,
            "a report is yielded as soon as it is known, even while the input is slow"
        );
        assert_eq!(
            pipeline_step(None, true, false, 2, |_| true),
            PipelineStep::AwaitReport,
            "the input is over: drain"
        );
        assert_eq!(pipeline_step(None, true, false, 0, |_| true), PipelineStep::Done);
    }

    #[test]
    fn at_most_one_batch_is_held_outside_the_window() {
        // With a batch in hand the pipeline never asks for another: it submits or waits.
        for in_flight in 0..4 {
            for room in [false, true] {
                let step = pipeline_step(Some(1), false, false, in_flight, |_| room);
                assert!(matches!(step, PipelineStep::Submit | PipelineStep::AwaitReport), "{step:?}");
            }
        }
    }

    #[test]
    fn a_refused_batch_is_reported_after_every_batch_before_it() {
        assert_eq!(pipeline_step(None, false, true, 2, |_| true), PipelineStep::AwaitReport);
        assert_eq!(pipeline_step(Some(1), false, true, 1, |_| true), PipelineStep::AwaitReport);
        assert_eq!(pipeline_step(None, false, true, 0, |_| true), PipelineStep::Refuse);
    }
}
