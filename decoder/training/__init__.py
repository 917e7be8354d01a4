"""Training the embedded default model: tokenizer, corpus, examples, objective, trainer, GPU recipe."""
