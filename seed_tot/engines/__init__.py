"""Engines outside the project's torch executors: inference servers reached over HTTP.

| module            | what it does                                                          |
|-------------------|-----------------------------------------------------------------------|
| http.py           | JSON over HTTP with stdlib only; failures as two exception kinds        |
| llama_api.py      | llama.cpp `/completion`: request payload and reply parsing (pure)      |
| openai_api.py     | OpenAI-compatible `/v1/completions` (vLLM, SGLang): payload and reply  |
| connect.py        | on connect: which API, tokenizer probe, what the trace records          |
| server_executor.py| the Executor: one HTTP request per GenerationRequest, N at a time       |
| embedded.py       | start/stop llama.cpp's server (the `xllamacpp` wheel) in a child process|
| llama_process.py  | that child process                                                     |

Nothing above the executor knows where tokens came from.
"""
