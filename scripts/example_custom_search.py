"""A custom tree search: your prompts and value parser, a draft/target pair, BFS, a JSON trace.

Usage: python scripts/example_custom_search.py [MODELS] [METHOD] [TRACE]
MODELS: tiny (random weights, instant) or default (the cached Qwen2.5-Coder pair);
METHOD: an executor such as ar or seed; TRACE: where to write the trace.
"""
import click

import seed_tot as st


@click.command()
@click.argument("models", default="tiny")
@click.argument("method", default="ar")
@click.argument("trace_path", default="example_trace.json")
def main(models: str, method: str, trace_path: str) -> None:
    draft, target = st.load_pair(f"{models}-draft", f"{models}-target")
    task = st.SimpleTask(
        thought_template="Question: {question}\nSteps so far:\n{state}\n"
        "Write only the next step. When you know the result, write 'Answer: <number>'.",
        value_template="Question: {question}\nSteps:\n{state}\nRate these steps from 1 (useless) to 10 (solved).",
        answer_pattern=r"Answer: *(-?\d+)",
    )
    problem = st.Problem(id="apples", question="Tom has 3 apples and buys 4 more. How many has he now?", gold="7")
    executor = st.make_executor(method, target, draft)
    try:
        result = st.solve(
            task, problem, executor, target, search="bfs", n_thoughts=3, breadth=2, depth=3,
            thought_decode=st.DecodeConfig(max_new_tokens=48, temperature=1.0),
            value_decode=st.DecodeConfig(max_new_tokens=8),
        )
        st.write_trace(trace_path, st.to_trace(result, task, executor))
    finally:
        executor.close()
    print(f"answer={result.answer} correct={result.correct} nodes={len(result.tree)}")
    print(f"{result.metrics.new_tokens} tokens at {result.metrics.tokens_per_second:.1f} tokens/s -> {trace_path}")


if __name__ == "__main__":  # the guard matters: executors such as seed spawn worker processes
    main()
