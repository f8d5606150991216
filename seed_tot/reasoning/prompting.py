"""Turn a task's user message into prompt token ids for the target model."""

from __future__ import annotations

from seed_tot.errors import SeedTotError


class PromptFormatter:
    """Wraps the target tokenizer: chat template (one user message, generation prompt added)
    when the tokenizer has one, plain text otherwise."""

    def __init__(self, tokenizer) -> None:
        if tokenizer is None:
            raise SeedTotError(
                "The reasoning engine needs the target model's tokenizer: load the model with its tokenizer."
            )
        self.tokenizer = tokenizer

    @property
    def uses_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def format(self, message: str) -> str:
        """The prompt text the model sees for the user message `message`."""
        if not self.uses_chat_template:
            return message
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], tokenize=False, add_generation_prompt=True
        )

    def reply_context(self, message: str, reply_start: str = "") -> str:
        """The prompt text for `message` with `reply_start` as the beginning of the model's reply
        (without a chat template, the reply starts on a new line)."""
        return (self.reply_prefix(message) if reply_start else self.format(message)) + reply_start

    def reply_prefix(self, message: str) -> str:
        """The prompt text for `message` that a written reply continues (see reply_context)."""
        text = self.format(message)
        if not self.uses_chat_template and not text.endswith(("\n", " ")):
            text += "\n"
        return text

    def encode(self, message: str, reply_start: str = "") -> list[int]:
        """Token ids of the prompt for `message` (then `reply_start`, see reply_context)."""
        return self.encode_text(self.reply_context(message, reply_start))

    def encode_text(self, text: str) -> list[int]:
        """Token ids of a prompt text made by format / reply_context."""
        # A chat template already writes the special tokens it needs (BOS included).
        ids = self.tokenizer.encode(text, add_special_tokens=not self.uses_chat_template)
        return [int(i) for i in ids]
