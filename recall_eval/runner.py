"""The runner: calibrated cases -> requests (bounded concurrency) -> scored Results in the store.

Every case ends in results.jsonl exactly once: a result is appended the moment its case finishes;
cases already final in the store are skipped (resume); a cancelled case (Ctrl-C, a stop) is not
recorded and runs again on resume.

With a ServerHandle the runner tells a dead server from a slow or rude one: when a request fails
with a connection error or a 5xx (or times out), it asks handle.poll_death(). A death gives every
case that was in flight on that server the death's outcome (oom / crash / too_long, with the reason
and log line in Result.error); the server is relaunched (bounded retries with backoff, counted in
run.json) and the sweep goes on. After `max_consecutive_deaths` deaths with no live answer in
between, the sweep stops with SweepStopped.

Without a handle (an external server) a failed connection is checked from outside: the server is
probed (a plain connect); while it refuses connections the probe is repeated with backoff, and after
`gone_after_probes` refusals in a row the run stops with ServerGone (run.json: interrupted, the resume
line printed) instead of turning every remaining case into `error`. The case that met it is not
recorded, so a resume runs it.

Runners running at once (an interleaved compare) share recall_eval.turns: their requests start in
turn, case by case, so both variants meet the same machine state.

The event loop only awaits: results are appended and fsynced by one writer thread
(recall_eval.results_writer: in finishing order, handed over without waiting; a case counts as done
for resume once its line is on disk), death checks (a process scan and a log read) and relaunches
run in threads, so the timings of the requests in flight stay true.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from recall_eval.adaptations import TOKEN_COUNTS
from recall_eval.calibration import OFF_TARGET, tolerance
from recall_eval.chat_client import ChatClient, RequestFailed
from recall_eval.errors import UserError
from recall_eval.event_stream import excerpt
from recall_eval.indexer_capture import Generation, IndexerCapture
from recall_eval.results_writer import ResultsWriter
from recall_eval.scoring import cut_in_reasoning
from recall_eval.server_probe import refuses_connections
from recall_eval.store import RunStore, latest_by_case
from recall_eval.tokenization import USAGE_TOKENIZER_NAME
from recall_eval.turns import LaneTurns
from recall_eval.types import Case, Completion, Outcome, Result, ServerDeath, ServerHandle
from recall_eval.verdicts import judge, long_answer


def _counted_by_server(tokenizer: str | None) -> bool:
    """A prompt length from the server's own tokenizer endpoint (not an estimate, not a usage probe)."""
    return tokenizer is not None and tokenizer.startswith("server:/") and tokenizer != USAGE_TOKENIZER_NAME


class SweepStopped(UserError):
    """The sweep cannot go on (the server keeps dying, or cannot be relaunched)."""


class ServerGone(SweepStopped):
    """An external server stopped accepting connections mid-run: the run is interrupted, not failed
    (resume it once the server is back)."""


@dataclass
class RunnerSettings:
    variant: str = "default"
    max_tokens: int = 32
    case_budgets: bool = False  # each case's own answer budget where it has one (RunSpec.case_budgets)
    concurrency: int = 1
    # the server's context (prompt + answer): a case whose prompt and answer budget exceed it is too_long,
    # not sent
    context_limit: int | None = None
    max_consecutive_deaths: int = 3
    # an external server refusing this many probes in a row (after a failed connection) is gone
    gone_after_probes: int = 3
    gone_probe_backoff_s: float = 1.0  # wait before the 2nd probe; doubled after each
    relaunch_attempts: int = 3
    relaunch_backoff_s: float = 2.0
    retry: frozenset[str] = frozenset()  # outcomes whose cases run again (--retry); earlier lines are kept
    # the budget of a thinking run, used once an answer shows reasoning when max_tokens was not given
    # (None: the user chose max_tokens, or it is already a thinking budget)
    thinking_max_tokens: int | None = None
    # run.json says an earlier session of this run already raised the budget (a resume): start raised
    thinking_learned: bool = False


def answer_budget(case: Case, max_tokens: int, case_budgets: bool) -> int:
    """The max_tokens a case is sent with: its own budget (RULER's per task, MRCR's) when the run takes
    per-case budgets and the case has one, else the run's."""
    return case.max_tokens if case_budgets and case.max_tokens is not None else max_tokens


@dataclass(frozen=True)
class Replica:
    """One endpoint serving the variant, and how many requests it takes at once."""

    client: ChatClient
    concurrency: int = 1


@dataclass
class RunnerHooks:
    on_start: Callable[[Case], None] = lambda case: None
    on_result: Callable[[Result], None] = lambda result: None
    on_event: Callable[[str], None] = lambda message: None  # relaunches, deaths: one line each
    # what the run changed to suit the server (recall_eval.adaptations): name, one line
    on_adapted: Callable[[str, str], None] = lambda name, line: None


@dataclass
class _ServerState:
    epoch: int = 0  # incremented by each relaunch
    deaths: dict[int, ServerDeath] = field(default_factory=dict)  # epoch -> how that server died
    consecutive_deaths: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    death_check: asyncio.Task[ServerDeath | None] | None = None  # a poll_death running in a thread
    gone_check: asyncio.Lock = field(default_factory=asyncio.Lock)  # one probe sequence at a time


def death_error(death: ServerDeath) -> str:
    parts = [death.reason]
    if death.exit_code is not None:
        parts.append(f"exit code {death.exit_code}")
    if death.log_line:
        parts.append(f"log: {death.log_line.strip()}")
    return "; ".join(parts)


class Runner:
    def __init__(
        self,
        store: RunStore,
        client: ChatClient,
        settings: RunnerSettings,
        handle: ServerHandle | None = None,
        hooks: RunnerHooks | None = None,
        capture: IndexerCapture | None = None,
        replicas: Sequence[Replica] | None = None,
        turns: LaneTurns | None = None,
        answer_counter: Callable[[str], Awaitable[int]] | None = None,
    ):
        self.store = store
        self.client = client
        # several endpoints serving one variant: each pulls cases as its slots free up
        self.replicas = tuple(replicas) if replicas else (Replica(client, max(1, settings.concurrency)),)
        self.settings = settings
        self.handle = handle
        self.hooks = hooks or RunnerHooks()
        self.capture = capture  # --capture-indexer: requests go to /generate and results get coverage
        self.turns = turns  # runners running at once (interleaved compare): requests start in turn
        # the server's plain-text token count (tokenization.answer_counter): an answer's tokens where the
        # server streams no usage
        self.answer_counter = answer_counter
        # set once a reasoning server is seen (thinking_max_tokens); from the start when a resume learned it
        self.thinking_budget: int | None = settings.thinking_max_tokens if settings.thinking_learned else None
        # case id -> its lines already in results.jsonl (Result.attempt: 1 + these), read once per run
        self.earlier_attempts: Counter[str] = Counter()

    def pending(self, cases: Sequence[Case]) -> list[Case]:
        """The cases not yet final; reads results.jsonl once (and counts each case's earlier attempts)."""
        stored = self.store.attempts()
        self.earlier_attempts = Counter(result.case_id for result in stored)
        retry = self.settings.retry
        done = {result.case_id for result in latest_by_case(stored).values() if result.outcome not in retry}
        return [case for case in cases if case.id not in done]

    async def run(self, cases: Sequence[Case]) -> int:
        """Run every case not yet final; returns how many results were appended."""
        todo = self.pending(cases)
        state = _ServerState()
        state.ready.set()
        queue: asyncio.Queue[Case] = asyncio.Queue()
        for case in todo:
            queue.put_nowait(case)
        appended = 0
        writer: ResultsWriter | None = None

        async def worker(replica: Replica) -> None:
            nonlocal appended
            while not queue.empty():
                case = queue.get_nowait()
                if self.turns is not None:
                    await self.turns.take(case.id)
                result, died_on = await self._run_case(case, state, replica.client)
                assert writer is not None
                writer.put(result)
                appended += 1
                self.hooks.on_result(result)
                if died_on is not None:
                    await self._relaunch(died_on, state)

        try:
            # the writer's thread is started inside: a cancel anywhere below (waiting for the other
            # lanes to join, say) still closes it
            writer = ResultsWriter(self.store)
            if self.turns is not None:
                await self.turns.join([case.id for case in todo])
            async with asyncio.TaskGroup() as group:
                for replica in self.replicas:
                    for _ in range(max(1, replica.concurrency)):
                        group.create_task(worker(replica))
        except BaseExceptionGroup as group:
            raise first_leaf(group) from None
        finally:
            # lines already handed to the writer reach the disk
            write_error = writer.close() if writer is not None else None
            if state.death_check is not None:
                state.death_check.cancel()
        if write_error is not None:
            raise write_error
        return appended

    def _budget(self, case: Case) -> int:
        """The case's answer budget; at least the thinking budget once the server was seen reasoning."""
        budget = answer_budget(case, self.settings.max_tokens, self.settings.case_budgets)
        return max(budget, self.thinking_budget) if self.thinking_budget is not None else budget

    def _result(
        self,
        case: Case,
        outcome: Outcome,
        started_at: float,
        completion: Completion | None = None,
        error: str | None = None,
        endpoint: str | None = None,
        answer: str | None = None,
        sent_with: int | None = None,
    ) -> Result:
        """sent_with: the answer budget of the request that gave this result (None: never sent)."""
        params = dict(case.params)
        served = completion.prompt_tokens if completion is not None else None
        source = "usage" if served is not None else None
        if served is None and completion is not None and _counted_by_server(case.tokenizer):
            # no usage: the server's own tokenizer endpoint counted this very prompt at calibration
            served, source = case.prompt_tokens, case.tokenizer
        off = served - case.target_tokens if served is not None else None
        if case.needle_token_end is not None:
            params["needle_token_end"] = case.needle_token_end
        return Result(
            case_id=case.id,
            suite=case.suite,
            variant=self.settings.variant,
            outcome=outcome,
            strict_outcome=outcome,
            answer=answer if answer is not None else (completion.text if completion is not None else ""),
            expected=case.expected,
            target_tokens=case.target_tokens,
            depth_percent=case.depth_percent,
            trial=case.trial,
            prompt_tokens=case.prompt_tokens,
            needle_token_offset=case.needle_token_offset,
            tokenizer=case.tokenizer,
            completion=completion,
            error=error,
            started_at=started_at,
            finished_at=time.time(),
            params=params,
            server_prompt_tokens=served,
            server_prompt_tokens_source=source,
            length_error_tokens=off,
            # a case sent as it is (a prepared file's row, a no-context baseline) has no length to be off
            # calibration could not reach the target within tolerance (params["off_target"] says why)
            length_off_target=bool(case.params.get(OFF_TARGET))
            or (
                off is not None
                and abs(off) > tolerance(case.target_tokens)
                and case.params.get("grid") not in ("none", "baseline")
            ),
            endpoint=endpoint,
            max_tokens=sent_with,
            attempt=1 + self.earlier_attempts.get(case.id, 0),
        )

    async def _run_case(
        self, case: Case, state: _ServerState, client: ChatClient | None = None
    ) -> tuple[Result, int | None]:
        """The case's result, and the server epoch it saw die (None if it did not)."""
        started_at = time.time()
        if case.not_applicable is not None:  # calibration found no form of it that fits its length
            return self._result(case, "not_applicable", started_at, error=case.not_applicable), None
        if case.too_long is not None:  # calibration: the server refused it as longer than its context
            return self._result(case, "too_long", started_at, error=case.too_long), None
        reason = self._does_not_fit(case)
        if reason is not None:
            return self._result(case, "too_long", started_at, error=reason), None
        client = client or self.client
        endpoint = client.endpoint.base_url
        await state.ready.wait()
        epoch = state.epoch
        # the prompt exists from here until this case's result is made: a case calibrated without it
        # (Calibrator keep_prompts=False) is rendered again now, so memory holds only in-flight prompts
        case = case.with_prompt()
        self.hooks.on_start(case)
        generation = None
        try:
            give_up = lambda: self._known_death(epoch, state) is not None  # noqa: E731
            budget = self._budget(case)  # recorded as sent: the budget may rise while it is in flight
            generation, completion = await self._send(case, budget, client, give_up)
            self._note_reasoning(completion)
            if budget < self._budget(case) and cut_in_reasoning(completion):  # again, with the new budget
                budget = self._budget(case)
                generation, completion = await self._send(case, budget, client, give_up)
        except RequestFailed as failure:
            if failure.kind == "auth":
                raise UserError(f"{endpoint}: {failure}") from None
            if failure.kind == "connection" and self.handle is None:
                await self._stop_if_gone(client, state, failure)
            result, died_on = await self._failed(case, failure, epoch, state, started_at)
            return result.model_copy(update={"endpoint": endpoint, "max_tokens": budget}), died_on
        self._served()
        state.consecutive_deaths = 0
        completion = await self._counted(case, completion)
        # an answer long enough to echo the prompt is checked against the whole prompt: off the loop
        if long_answer(completion):
            verdicts = await asyncio.to_thread(judge, case, completion)
        else:
            verdicts = judge(case, completion)
        result = self._result(
            case, verdicts.outcome, started_at, completion, endpoint=endpoint, sent_with=budget
        ).model_copy(update=verdicts.stored())
        if self.capture is not None and generation is not None:
            coverage = self.capture.coverage(case, generation, verdicts.outcome)
            result = result.model_copy(update={"coverage": coverage})
        return result, None

    async def _counted(self, case: Case, completion: Completion) -> Completion:
        """Where the server streamed no usage: the answer's tokens counted by the server's tokenizer
        (instead of its chunks), said once for the run with where each number comes from."""
        if completion.completion_tokens_source != "chunks" or self.answer_counter is None:
            return completion
        try:
            tokens = await self.answer_counter(completion.reasoning + completion.text)
        except (UserError, httpx.HTTPError, ValueError):
            return completion  # the chunk count stays, marked as such
        prompt = (
            f"prompt lengths are its {case.tokenizer} counts"
            if completion.prompt_tokens is None and _counted_by_server(case.tokenizer)
            else "prompt lengths are its usage counts"
        )
        self.hooks.on_adapted(
            TOKEN_COUNTS,
            f"the server streams no usage.completion_tokens: completion tokens are its tokenizer's count of each "
            f"answer (not streamed chunks); {prompt} (results: completion_tokens_source, "
            "server_prompt_tokens_source)",
        )
        return completion.model_copy(
            update={"completion_tokens": tokens, "completion_tokens_source": "tokenized"}
        )

    def _does_not_fit(self, case: Case) -> str | None:
        """Why the case's prompt and its answer budget together do not fit the server's context (a
        prompt that fits alone would get its answer cut after a few tokens and read as `truncated`);
        None when they fit or the context is unknown."""
        limit = self.settings.context_limit
        if limit is None:
            return None
        length = case.prompt_tokens if case.prompt_tokens is not None else case.target_tokens
        budget = self._budget(case)
        over = length + budget - limit
        if over <= 0:
            return None
        return (
            f"prompt of {length} tokens + answer budget of {budget} tokens is {over} tokens over the server's "
            f"context length ({limit} tokens); not sent"
        )

    async def _send(
        self, case: Case, budget: int, client: ChatClient, give_up: Callable[[], bool]
    ) -> tuple[Generation | None, Completion]:
        """One request for the case: /generate when the run captures the indexer, else the chat API."""
        if self.capture is not None:
            generation = await self.capture.complete(case, budget, give_up)
            return generation, generation.completion
        return None, await client.complete(case.messages, budget, give_up)

    def _note_reasoning(self, completion: Completion) -> None:
        """A reasoning answer under the default budget: switch to the thinking budget (once, one line)."""
        thinking = self.settings.thinking_max_tokens
        if thinking is not None and completion.reasoning.strip() and self.thinking_budget is None:
            self.thinking_budget = thinking
            line = (
                f"the server reasons before answering; the answer budget is {thinking} tokens instead of "
                f"{self.settings.max_tokens} (give --max-tokens to choose)"
            )
            self.hooks.on_adapted("thinking_budget", line)

    async def _stop_if_gone(self, client: ChatClient, state: _ServerState, failure: RequestFailed) -> None:
        """After a failed connection to an external server: probe it; ServerGone when it refuses
        `gone_after_probes` probes in a row (with backoff between them), else return (the case gets
        its `error`). Cases failing at once share one probe sequence."""
        settings = self.settings
        url = client.endpoint.base_url
        async with state.gone_check:
            for probe in range(settings.gone_after_probes):
                if probe:
                    await asyncio.sleep(settings.gone_probe_backoff_s * 2 ** (probe - 1))
                if not await refuses_connections(url, client.http):
                    return
            waited = sum(settings.gone_probe_backoff_s * 2**i for i in range(settings.gone_after_probes - 1))
            raise ServerGone(
                f"{url} refuses connections ({settings.gone_after_probes} probes in a row over {waited:g} s, "
                f"after a request failed: {failure}); the server is gone, so the run stops here, "
                "interrupted, instead of recording every remaining case as an error; start the server, then "
                "resume"
            )

    def _served(self) -> None:
        """The server answered (a stat of its log, no read): older log lines no longer explain a death."""
        if self.handle is not None:
            self.handle.note_served()

    def _known_death(self, epoch: int, state: _ServerState) -> ServerDeath | None:
        """For the client's retry loop, which cannot await: what is known now; starts a check in a
        thread (seen by the next retry, after its backoff) when none is running."""
        if epoch not in state.deaths and self.handle is not None and epoch == state.epoch:
            if state.death_check is None or state.death_check.done():
                state.death_check = asyncio.get_running_loop().create_task(self._death_of(epoch, state))
        return state.deaths.get(epoch)

    async def _death_of(self, epoch: int, state: _ServerState) -> ServerDeath | None:
        if epoch in state.deaths:
            return state.deaths[epoch]
        if self.handle is None or epoch != state.epoch:
            return None
        death = await asyncio.to_thread(self.handle.poll_death)  # a process scan and a log read
        if death is not None and epoch == state.epoch:
            state.deaths.setdefault(epoch, death)
            state.ready.clear()  # hold new requests until the relaunch
        return state.deaths.get(epoch)

    async def _failed(
        self, case: Case, failure: RequestFailed, epoch: int, state: _ServerState, started_at: float
    ) -> tuple[Result, int | None]:
        if failure.kind in ("too_long", "rejected"):
            self._served()  # a 4xx is an answer from a live server
        if failure.kind == "too_long":
            return self._result(case, "too_long", started_at, error=str(failure)), None
        death = None
        if failure.kind in ("server", "connection", "timeout"):
            death = await self._death_of(epoch, state)
        if death is None:
            outcome: Outcome = "timeout" if failure.kind == "timeout" else "error"
            detail = f"{failure} (after {failure.attempts} attempts)"
            if failure.partial:
                detail += f"; received before it: {excerpt(failure.partial)!r}"
            return self._result(case, outcome, started_at, error=detail, answer=failure.partial), None
        return self._result(case, death.outcome, started_at, error=death_error(death)), epoch

    async def _relaunch(self, epoch: int, state: _ServerState) -> None:
        """Relaunch once per death (the first case to get here does it; the others wait)."""
        assert self.handle is not None
        async with state.lock:
            if state.epoch != epoch:
                return
            death = state.deaths[epoch]
            state.consecutive_deaths += 1
            self.hooks.on_event(f"server died ({death.outcome}): {death_error(death)}")
            if state.consecutive_deaths >= self.settings.max_consecutive_deaths:
                raise SweepStopped(
                    f"the server died {state.consecutive_deaths} times in a row with no answer in between "
                    f"(last: {death.outcome}: {death.reason}); fix the profile, then resume"
                )
            await self._relaunch_with_retries(death)
            state.epoch += 1
            state.ready.set()

    async def _relaunch_with_retries(self, death: ServerDeath) -> None:
        assert self.handle is not None
        last_error = ""
        for attempt in range(1, self.settings.relaunch_attempts + 1):
            try:
                seconds = await asyncio.to_thread(self.handle.relaunch)
            except Exception as err:  # any launch failure: retried, then reported in one line
                last_error = f"{type(err).__name__}: {err}"
                self.hooks.on_event(f"relaunch attempt {attempt} failed: {last_error}")
                await asyncio.sleep(self.settings.relaunch_backoff_s * 2 ** (attempt - 1))
                continue
            run = await asyncio.to_thread(
                self.store.update_run, lambda run: run.model_copy(update={"relaunches": run.relaunches + 1})
            )
            self.hooks.on_event(f"server relaunched in {seconds:.1f}s (relaunch #{run.relaunches})")
            return
        raise SweepStopped(
            f"the server died ({death.outcome}) and {self.settings.relaunch_attempts} relaunches failed "
            f"(last: {last_error}); fix the profile, then resume"
        )


def first_leaf(group: BaseExceptionGroup) -> BaseException:
    """The first real error inside a (nested) exception group, for a one-line report."""
    first = group.exceptions[0]
    return first_leaf(first) if isinstance(first, BaseExceptionGroup) else first
