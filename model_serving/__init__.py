"""The policy side: proposers (vLLM/OpenAI-compatible, CPU baseline), prompts, parsing, tuning."""
