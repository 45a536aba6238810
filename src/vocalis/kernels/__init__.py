"""vocalis's own C++ kernels: the sources (``csrc/``), their build (:mod:`.native`) and the
modules that run them (:mod:`.f32`, :mod:`.int8`, :mod:`.int4`).

They are not one family's: Qwen3-TTS quantizes to int8 and int4 through them, and both
families may run their float32 steps through the float32 one (a measured tuning choice).
"""
