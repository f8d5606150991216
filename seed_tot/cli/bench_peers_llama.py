"""System b of `seed-tot bench --peers` (seed_tot/cli/bench_peers.py): llama.cpp's server from the
xllamacpp wheel, started in this child process and tuned for the work, fed by a small client that
sends the requests the package's own search asks for."""

from __future__ import annotations

import json
import time
from pathlib import Path

from seed_tot.cli.bench_peers_work import chain_settings, plan_for, problem_record, target_name, totals, write_jsonl
from seed_tot.observe.side_by_side import solve_concurrently


# ---------------------------------------------------------------- system b: tuned llama.cpp + small client

class LlamaClient:
    """One /completion request per GenerationRequest: token-id prompt, the package's sampler body
    (top-p then temperature, every other sampler neutral; seeded), results cut by the package's stop rule."""

    def __init__(self, url: str, tokenizer, log: list):
        from seed_tot.engines.server_executor import tokenizer_eos_ids

        self.url, self.tokenizer, self.log = url, tokenizer, log
        self.eos_ids = tokenizer_eos_ids(tokenizer)

    def generate(self, request):
        import urllib.request

        from seed_tot.decoding.token_sink import TokenSink, stop_rule
        from seed_tot.engines import llama_api
        from seed_tot.requests import GenerationResult, GenerationStats

        body = llama_api.completion_body(request)
        started = time.perf_counter()
        http = urllib.request.Request(self.url + llama_api.PATH, data=json.dumps(body).encode(),
                                      headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(http, timeout=3600) as answer:
            reply = json.loads(answer.read())
        seconds = time.perf_counter() - started
        tokens, reason = llama_api.reply_tokens(reply), llama_api.finish_reason(reply)
        if reason == "eos" and not request.config.ignore_eos and (not tokens or tokens[-1] not in self.eos_ids):
            tokens.append(min(self.eos_ids))  # the server drops EOS; the project's decoders keep it
        sink = TokenSink(stop_rule(request.config, self.eos_ids,
                                   lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True)))
        sink.extend(tokens)
        stats = GenerationStats(new_tokens=len(sink.token_ids), target_forwards=len(sink.token_ids),
                                wall_seconds=seconds, cached_prompt_tokens=llama_api.cached_prompt_tokens(reply))
        self.log.append({
            "request_id": request.request_id, "seed": request.seed, "config": request.config.model_dump(mode="json"),
            "prompt_text": self.tokenizer.decode(request.prompt_ids, skip_special_tokens=False),
            "prompt_ids": list(request.prompt_ids), "new_tokens": len(sink.token_ids),
            "finish_reason": sink.finish_reason or reason, "seconds": round(seconds, 3),
            "cache_n": stats.cached_prompt_tokens, "timings": reply.get("timings"),
        })
        return GenerationResult(request.request_id, sink.token_ids,
                                self.tokenizer.decode(sink.token_ids, skip_special_tokens=True),
                                sink.finish_reason or reason, stats)


def worker_b(spec: dict, out: Path) -> dict:
    import xllamacpp

    from seed_tot.engines.connect import file_sha256
    from seed_tot.engines.embedded import LlamaServer, LlamaServerSettings
    from seed_tot.engines.setup import gguf_path, slot_context, tokenizer_for
    from seed_tot.reasoning.prompting import PromptFormatter

    plan = plan_for(spec, "llama-cpp", out / "run")
    tokenizer = tokenizer_for(target_name(spec))
    formatter = PromptFormatter(tokenizer)
    search = plan.search_cls(plan.task, None, formatter, plan.search_config)
    chains = chain_settings(plan.search_config)
    rows = min(spec["concurrency"], len(plan.todo)) * chains["chains"]
    budget = max(c["max_new_tokens"] for c in chains["per_chain"])
    longest = max(len(formatter.encode(plan.task.cot_prompt(p))) for p in plan.todo)
    ctx_per_slot = slot_context(longest + budget)
    model_file = gguf_path(target_name(spec))
    settings = LlamaServerSettings(model_file, slots=rows, ctx_per_slot=ctx_per_slot, threads=spec["threads"])
    log: list[dict] = []
    records = []
    loading = time.perf_counter()
    with LlamaServer(settings) as server:
        load_s = time.perf_counter() - loading
        client = LlamaClient(server.url, tokenizer, log)
        started = time.perf_counter()
        for result in solve_concurrently(search.steps, plan.todo, client.generate, spec["concurrency"], rows):
            records.append(problem_record(result, time.perf_counter() - started))
        run_wall = time.perf_counter() - started
    write_jsonl(out / "results.jsonl", records)
    write_jsonl(out / "requests.jsonl", sorted(log, key=lambda r: r["request_id"]))
    return totals(records, run_wall, load_s) | {
        "method": "llama.cpp server (xllamacpp) + harness client", "dtype": "gguf",
        "concurrency": spec["concurrency"], "threads": spec["threads"], "slots": rows,
        "knobs": {"xllamacpp": xllamacpp.__version__, "model_file": model_file, "model_sha256": file_sha256(model_file),
                  "ctx_per_slot": ctx_per_slot, "slots": rows, "threads": spec["threads"], "cont_batching": True,
                  "cache_prompt": True, "prompt_ids_sent": True, "server_defaults": server_defaults(),
                  "sampler": "seed_tot.engines.llama_api.completion_body (top_p then temperature, others neutral)"},
        "chains": chains,
    }


def server_defaults() -> dict:
    """llama.cpp settings this harness leaves at the wheel's defaults (recorded, not chosen)."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    return {name: getattr(params, name, None) for name in ("n_batch", "n_ubatch", "cache_ram_mib", "n_cache_reuse", "kv_unified")}
