"""Options shared by the task commands (and `bench`): models, method, search, decoding, data, output."""

from __future__ import annotations

from typing import get_args

import click

from seed_tot.cli.run_config import JUDGED_SECOND_ROUND, RunConfig
from seed_tot.reasoning.chain_lines import LINE_DEPTH
from seed_tot.scheduling.methods import AUTO, CONCURRENCY_DEFAULTS, METHOD_NAMES, method_help
from seed_tot.search import SEARCHES, SearchConfig
from seed_tot.search.mcts import MCTSConfig
from seed_tot.task import DEFAULT_THOUGHT_TOKENS


def default(name: str):
    """The default of the run setting an option fills: RunConfig's field (whose search settings take
    theirs from the search configs), so a default is written once."""
    return RunConfig.model_fields[name].default


def choices(name: str, config_class: type = SearchConfig) -> click.Choice:
    """The values a search config's field allows (its Literal type), as the option's choices."""
    return click.Choice(list(get_args(config_class.model_fields[name].annotation)))


def _apply(f, options):
    """Apply click options so that --help lists them in the order written."""
    for option in reversed(options):
        f = option(f)
    return f


def model_options(f):
    return _apply(f, [
        click.option("--target", default=default("target"), show_default=True, help="Target model: alias, local directory, .gguf file or hub id."),
        click.option("--draft", default=default("draft"), show_default=True, help="Draft model for speculative methods (same tokenizer family as the target)."),
        click.option("--tiny", is_flag=True, help="Use the tiny in-process random-weight pair (seconds; for smoke tests, answers are gibberish)."),
        click.option("--device", default=default("device"), show_default=True, help="cpu, cuda, cuda:1 ... or auto."),
        click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=default("dtype"), show_default=True, help="auto: bfloat16 on CUDA; on a CPU, float16 where it has AVX-512 FP16 (faster and closer to float32 than bfloat16 here), else bfloat16 where it has AVX-512 BF16, else float32."),
        click.option("--draft-dtype", "draft_dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=default("draft_dtype"), show_default=True, help="Draft model dtype. auto: the target's, except bfloat16 beside a float16 target on a CPU with packed bfloat16 products (faster for a draft's narrow forwards). The target verifies every token, so this never changes the output."),
        click.option("--threads", type=int, default=default("threads"), help="torch threads for the target (default: all cores)."),
        click.option("--int8", is_flag=True, help="Round the target's linear layers to int8 (CPU with fbgemm; the MLP's down projections stay 16-bit): faster decoding, but lossy, so greedy output differs from the 16-bit target's at a few percent of positions (docs/engines.md#int8-linear-layers). In-process methods; not with the learned judge."),
        click.option("--max-memory", "max_memory", default=default("max_memory"), metavar="SIZE", help="Memory the in-process run may hold, e.g. 8G (default: half the machine's RAM). Rows wait in the queue and the prefix cache shrinks to stay under it; a budget that cannot hold the weights and one row is refused before loading."),
    ])


def method_options(f):
    return _apply(f, [
        click.option("--method", type=click.Choice([AUTO, *METHOD_NAMES]), default=default("method"), show_default=True, help=method_help()),
        click.option("--k-config", "k_config", default=default("k_config"), help="Draft token-tree shape, e.g. 2,2,1 (candidates per position); 1,1,1 = plain 3-token draft."),
        click.option("--k", "k", type=int, default=default("k"), help="Draft length for a plain chain draft (same as --k-config 1,1,...,1)."),
        click.option("--workers", type=int, default=default("workers"), help="SEED draft processes (default: n thoughts)."),
        click.option("--server-url", "server_url", default=default("server_url"), help="--method server: base URL of a running llama.cpp, vLLM or SGLang server, e.g. http://127.0.0.1:8080 (its model must use the --target tokenizer)."),
        click.option("--server-api", "server_api", type=click.Choice(["auto", "llama.cpp", "openai"]), default=default("server_api"), show_default=True, help="--method server: llama.cpp's /completion or OpenAI-compatible /v1/completions (auto: ask the server)."),
        click.option("--server-parallel", "server_parallel", type=int, default=default("server_parallel"), help="llama-cpp/server: requests in flight at once (llama-cpp: also its slots). Default: the server's slots; for llama-cpp, one per row the run decodes at once (problems at once x chains), as many as --max-memory holds."),
        click.option("--server-timeout", "server_timeout", type=float, default=default("server_timeout"), show_default=True, help="llama-cpp/server: seconds to wait for one request before retrying it (3 retries, doubling back-off)."),
        click.option("--with-draft", "with_draft", is_flag=True, help="llama-cpp: speculative decoding with --draft as llama.cpp's draft model."),
        click.option("--method-option", "method_options", multiple=True, default=default("method_options"), metavar="NAME=VALUE", help="A setting of the method's executor, repeatable, e.g. --method seed --method-option batched_verify=true --method-option share_prefix=true, or --method-option prefix_cache_mb=2048 for the batched methods (docs/executors.md lists each method's settings)."),
    ])

def search_options(f):
    return _apply(f, [
        click.option("--search", type=click.Choice(list(SEARCHES)), default=default("search"), help="Search algorithm (default: the task's own: self-consistency for gsm8k, where the tree answered no better than the chains it runs, at twice their tokens; mcts for blocksworld, where MCTS over chosen legal moves solved more than the BFS tree, which solved more than its chains (with a method that cannot score, which cannot choose moves: self-consistency, which a tree of sampled moves did not beat); bfs for creative-writing, which has no chain prompt). bfs, mcts: tree searches; best-of-n: --thoughts complete chains of thought, the evaluator's best-rated answers (a baseline); self-consistency: no tree, the greedy chain of thought and --cot-samples sampled ones answer by majority vote."),
        click.option("--thoughts", "n_thoughts", type=int, default=default("n_thoughts"), show_default=True, help="Thoughts generated per expanded state (n)."),
        click.option("--breadth", type=int, default=default("breadth"), show_default=True, help="BFS: states kept per step (b)."),
        click.option("--backtrack/--no-backtrack", default=default("backtrack"), show_default=True, help="BFS: when no kept state can go on (each shown wrong, a pruned repeat or a dead end) and none holds an answer, go on from the best unexpanded states elsewhere in the tree (still at most --depth steps)."),
        click.option("--depth", type=int, default=default("depth"), help="Steps T (default: the task's paper setting)."),
        click.option("--iterations", type=int, default=default("iterations"), show_default=True, help="MCTS: iterations."),
        click.option("--exploration-weight", type=float, default=default("exploration_weight"), show_default=True, help="MCTS: UCT exploration weight."),
        click.option("--thought-mode", "thought_mode", type=choices("thought_mode"), default=default("thought_mode"), help="How a state's children are made: sample (--thoughts sampled thoughts), line (tasks with a chain-of-thought prompt: a state is a partial chain, a thought its next line; with --value-mode learned, BFS is a value-guided beam over lines; --depth counts lines, default " + str(LINE_DEPTH) + "), choose (tasks that list their moves: the target's --thoughts most likely listed moves, read from forwards, no thought generated) or random (--thoughts listed moves drawn at random with a per-node seed, no model call: a blind baseline). Default: the task's own where the method can score (Blocksworld: choose), else sample."),
        click.option("--known-states/--no-known-states", default=default("known_states"), show_default=True, help="Tasks that name their states (Blocksworld): prune thoughts that return to a state on their path or already in the tree, and stop at a state shown to reach the goal."),
        click.option("--output-strategy", type=choices("output_strategy", MCTSConfig), default=default("output_strategy"), show_default=True, help="MCTS: how the answer node is chosen."),
    ])

def decode_options(f):
    return _apply(f, [
        click.option("--temperature", type=float, default=default("temperature"), show_default=True, help="Thought sampling temperature (0 = greedy)."),
        click.option("--top-p", type=float, default=default("top_p"), show_default=True, help="Nucleus sampling mass for thoughts and evaluator replies."),
        click.option("--max-new-tokens", type=int, default=default("max_new_tokens"), help=f"New tokens per thought (default: the task's budget: {DEFAULT_THOUGHT_TOKENS}, Creative Writing 768); a thought cut off here is rejected, never an answer."),
        click.option("--cot-max-new-tokens", "cot_max_new_tokens", type=int, default=default("cot_max_new_tokens"), show_default=True, help="New tokens per chain of thought (self-consistency's chains, best-of-n's, the CoT candidates of a tree); a chain cut off here casts no vote."),
        click.option("--value-max-new-tokens", type=int, default=default("value_max_new_tokens"), show_default=True, help="New tokens per State Evaluator reply."),
        click.option("--value-samples", type=int, default=default("value_samples"), show_default=True, help="Evaluator replies per state, averaged (k, as in Tree-of-Thoughts)."),
        click.option("--value-mode", type=choices("value_mode"), default=default("value_mode"), help="How the State Evaluator rates a state: samples (--value-samples replies, parsed), logits (the verdict words' probabilities from one forward, no reply generated; tasks with verdict words: GSM8K, Blocksworld), learned (a value head on the target's hidden states, trained with `seed-tot train value`; in-process methods; the chains of thought are rated too) or constant (every state no rule rejects is worth 0.5, no model call: a blind baseline). Default: the task's own where the method can score (Blocksworld: logits), else samples; GSM8K's self-consistency: learned where a head ships for the target and it decodes in this process (the default target does), its chains' votes weighted by their values."),
        click.option("--value-model", "value_model", type=click.Path(dir_okay=False), default=default("value_model"), help="The value head for --value-mode learned (default: the one shipped for the target, when there is one)."),
        click.option("--value-temperature", type=float, default=default("value_temperature"), show_default=True, help="Evaluator sampling temperature (0 = one greedy reply is enough: use --value-samples 1)."),
        click.option("--cot/--no-cot", default=default("cot"), show_default=True, help="Add one greedy chain-of-thought answer of the target to the vote (ties go to it); tasks with a CoT prompt (GSM8K, Blocksworld)."),
        click.option("--cot-samples", type=int, default=default("cot_samples"), show_default=True, help="Sampled chains of thought (at --temperature and --top-p) that join the vote beside the greedy one: independent paths, as in self-consistency. 0 = none; with --no-cot or --no-vote none run."),
        click.option("--escalate", "escalate", type=int, default=default("escalate"), help=f"Sampled chains of thought drawn in a second round where the vote over the first (greedy + --cot-samples) is unsure: its winning answer holds less than --escalate-below of the votes (default: {JUDGED_SECOND_ROUND} where the vote is judged by default, as GSM8K's with the default target in process; else 0, never)."),
        click.option("--escalate-below", "escalate_below", type=float, default=default("escalate_below"), show_default=True, help="The winning answer's share of the votes below which --escalate draws more chains (the default was chosen on GSM8K training problems for the learned judge's value-weighted vote)."),
        click.option("--escalate-from", "escalate_from", type=choices("escalate_from"), default=default("escalate_from"), show_default=True, help="Where --escalate's chains start: root (afresh) or chains (each continues the first half of the best-valued chain of the vote's leading answer or its runner-up, decoding only the rest)."),
        click.option("--vote/--no-vote", default=default("vote"), show_default=True, help="Answer by majority vote over the answer leaves (tasks with comparable answers); --no-vote keeps the search's own choice."),
        click.option("--stop-when-decided/--no-stop-when-decided", "stop_when_decided", default=default("stop_when_decided"), show_default=True, help="Chains alone voting (plainly, or weighted by the judge, which then reads each chain as it ends): cancel the chains still running once they can no longer change the answer (nor whether a second round is drawn). Same answer, fewer tokens."),
        click.option("--vote-weight", "vote_weight", type=choices("vote_weight"), default=default("vote_weight"), help="What one vote is (default: value for GSM8K's self-consistency where a learned judge ships for the target and it decodes in this process, else leaf): leaf (every answer leaf), path (the answer leaves of one parent state share one vote; each chain of thought is its own path) or value (each answer leaf votes with its value: a value-weighted vote; needs --value-mode learned)."),
        click.option("--seed", type=int, default=default("seed"), show_default=True, help="Run seed; every request's seed derives from it."),
    ])

def data_options(f):
    return _apply(f, [
        click.option("--data", "data_path", type=click.Path(dir_okay=False), default=default("data_path"), help="Data file (default: the vendored data set)."),
        click.option("--limit", type=int, default=default("limit"), help="Number of problems (default: all)."),
        click.option("--start", type=int, default=default("start"), show_default=True, help="Index of the first problem."),
        click.option("--ids", default=default("ids"), help="Comma-separated problem ids (overrides --start/--limit)."),
        click.option("--out", "out_dir", type=click.Path(file_okay=False), default=default("out_dir"), help="Output directory (default: runs/<task>-<method>)."),
        click.option("--resume", is_flag=True, help="Continue a run in --out: skip problems already in results.jsonl."),
        click.option("--concurrency", type=int, default=default("concurrency"), help="Problems searched at once; their requests share every executor call. Default: " + CONCURRENCY_DEFAULTS + ". In float32 results do not depend on it; in float16/bfloat16 a row's logits can change in the last bits with the rows it shares a forward with."),
        click.option("--batching", type=click.Choice(["continuous", "rounds"]), default=default("batching"), show_default=True, help="How searches share a batched executor: continuous (requests join and leave the decode batch token by token) or rounds (one merged call per round, which waits for its longest row); other executors always use rounds. In float32 results do not change."),
    ])


def ray_options(f):
    return _apply(f, [
        click.option("--ray", "ray_address", is_flag=False, flag_value="", default=default("ray_address"), metavar="[ADDRESS]", help="Search the problems on Ray actors, each loading the models and executor (pip install \"seed-tot[ray]\"). Alone: the cluster in RAY_ADDRESS or one started here with `ray start --head`, else a new Ray on this machine; or give the cluster's address (e.g. 10.0.0.5:6379, auto). This process writes every result and trace (docs/ray.md)."),
        click.option("--ray-actors", "ray_actors", type=int, default=default("ray_actors"), help="With --ray: number of actors (default: as many as the nodes hold when each takes the smallest node's CPUs, i.e. one per machine; --threads sets each actor's CPUs)."),
    ])


def _read_config_file(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """--config FILE: its settings become the command's defaults, so options given explicitly win."""
    if path is not None:
        from seed_tot.cli.run_config import read_config_file

        names = {p.name for p in ctx.command.params if p.name not in ("config_file", "print_config")}
        ctx.default_map = {**(ctx.default_map or {}), **read_config_file(path, names)}
    return path


def config_options(f):
    return _apply(f, [
        click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None, is_eager=True, expose_value=False, callback=_read_config_file, help="Read the settings from FILE, a JSON object as --print-config writes it; options given on the command line replace the file's values."),
        click.option("--print-config", "print_config", is_flag=True, help="Print the run's configuration, every default resolved (method, concurrency, the task's search and modes), as JSON, and exit without loading a model or reading the data."),
    ])
