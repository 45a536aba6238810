"""Qwen3-TTS (12 Hz): configs, checkpoints, talker, code predictor and speech-tokenizer codec."""
