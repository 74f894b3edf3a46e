"""`python -m bench --quick` run by the tests (tests/bench/test_bench*.py), in two halves that
the suite's two processes take at once: the steps that call a running node, and those that
measure in the test's own process. Only the output's shape is checked: every figure
present, numeric, with its target and verdict; never the values (the machine is shared)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
# The steps measured in-process, after the node has stopped (bench/run.py's `in_process`),
# and what they report on a quick run; then what the steps that call the node report.
IN_PROCESS_STEPS = (
    "diarization",
    "cloning",
    "say_it_right",
    "voice_quality",
    "transcription_quality",
)
IN_PROCESS_FIGURES = {
    # --quick scores the held-out 2-speaker conversations without overlap.
    "diarization_der_overlap_free",
    "diarization_count_exact_overlap_free",
    "diarization_jer_overlap_free",
    "diarization_peer_der_overlap_free",
    "diarization_rtf_overlap_free",
    "diarization_rss_growth_mib",
    "clone_average_gain",
    "clone_wer_delta",
    "clone_dvector_gain",
    "clone_similarity",
    "clone_ceiling",
    "clone_dvector_similarity",
    "clone_dvector_ceiling",
    "clone_base_wer",
    "clone_wer",
    "clone_conversion_rtf",
    "pronunciation_added_ms",
    "pronunciation_build_ms",
    "pronunciation_worst_ms",
    "ssml_parse_ms",
    "ssml_first_audio_ratio",
    "ssml_first_audio_ms",
    "plain_first_audio_ms",
    "continuity_cut_gap",
    "continuity_alone_gap",
    "continuity_slope_with_next",
    "continuity_slope_alone",
    "continuity_slope_whole_cut",
    "continuity_slope_whole_end",
    "continuity_falling_with_next",
    "continuity_falling_alone",
    # --quick measures what users hear in Spanish alone (Kokoro's path) and one clone.
    "tts_wer_es",
    "tts_heldout_wer_es",
    "tts_dnsmos_es",
    "tts_dnsmos_clone",
    "cpu_per_audio_s_kokoro",
    "cpu_per_audio_s_espeak",
    "cpu_per_audio_s_world",
    "cpu_per_audio_s_whisper_en",
    "cpu_per_audio_s_whisper_other",
    # --quick transcribes two real recordings (English).
    "stt_wer_real_en",
    "stt_wer_en",
    "stt_wer_all",
    "stt_detection",
    "stt_wer_vs_defaults_given",
    "stt_wer_vs_defaults_detected",
}
SERVED_FIGURES = {
    "diarize_time_ratio",
    "diarize_http_s",
    "diarize_plain_http_s",
    "diarize_words_http_s",
    "gateway_throughput_ratio",
    "gateway_full_rps",
    "gateway_bare_rps",
    "gateway_full_p50_ms",
    "gateway_full_p99_ms",
    "gateway_bare_p50_ms",
    "gateway_bare_p99_ms",
    "gateway_workers_speedup",
    "gateway_redis_1_worker_rps",
    "gateway_redis_2_workers_rps",
    "ledger_voices_ratio",
    "ledger_voices_now_rps",
    "ledger_voices_before_rps",
    "tts_ratio",
    "tts_rtf",
    "tts_http_s",
    "tts_in_process_s",
    "stt_ratio",
    "stt_rtf",
    "stt_wer",
    "stt_http_s",
    "stt_in_process_s",
    "busy_p99_ratio",
    "idle_p99_ms",
    "busy_p99_ms",
    "tts_concurrency_speedup",
    "tts_sequential_rps",
    "tts_concurrent_rps",
    "cpu_parallelism",
    "upload_rss_growth_mib",
    "tts_rss_growth_mib",
    "stream_first_byte_ratio",
    "stream_first_byte_ms",
    "stream_whole_s",
    "stream_concurrent_rps",
    "stream_concurrent_first_p50_ms",
    "stream_concurrent_first_max_ms",
    "provider_stt_latency_ratio",
    "provider_stt_straight_s",
    "provider_stt_through_s",
    "provider_stt_throughput_ratio",
    "provider_stt_straight_rps",
    "provider_stt_through_rps",
    "provider_node_cpu_ms",
    "provider_first_byte_overhead_ms",
    "provider_first_byte_straight_ms",
    "provider_first_byte_through_ms",
    "realtime_final_p50_ms",
    "realtime_first_delta_p50_ms",
    "realtime_overhead_p50_ms",
    "realtime_overhead_p95_ms",
    "realtime_batch_decode_ms",
    "realtime_four_final_p50_ms",
    "realtime_four_final_p95_ms",
    "realtime_four_first_delta_p50_ms",
    "stream_input_first_audio_ms",
    "wyoming_first_ratio",
    "wyoming_whole_ratio",
    "wyoming_ours_first_ms",
    "wyoming_theirs_first_ms",
    "wyoming_ours_whole_s",
    "wyoming_theirs_whole_s",
    "wyoming_four_rps_ratio",
    "wyoming_transcript_ratio",
    "wyoming_ours_transcript_s",
    "wyoming_theirs_transcript_s",
    "job_rtf_ratio",
    "job_rtf",
    "job_sync_rtf",
    "job_rss_growth_mib",
    "job_first_progress_s",
    "job_submit_s",
    "job_live_final_ratio",
    "job_live_idle_final_ms",
    "job_live_busy_final_ms",
}
# The figures the issue sets a target for.
TARGETED = {
    "gateway_throughput_ratio",
    "gateway_full_p99_ms",
    "gateway_workers_speedup",
    "ledger_voices_ratio",
    "tts_ratio",
    "stt_ratio",
    "busy_p99_ratio",
    "tts_concurrency_speedup",
    "upload_rss_growth_mib",
    "tts_rss_growth_mib",
    "pronunciation_added_ms",
    "ssml_parse_ms",
    "ssml_first_audio_ratio",
    "continuity_cut_gap",
    "clone_average_gain",
    "clone_wer_delta",
    "stream_first_byte_ratio",
    "stream_first_byte_ms",
    "tts_wer_es",
    "tts_heldout_wer_es",
    "stt_wer_vs_defaults_given",
    "stt_wer_vs_defaults_detected",
    "provider_stt_latency_ratio",
    "provider_stt_throughput_ratio",
    "provider_first_byte_overhead_ms",
    "realtime_first_delta_p50_ms",
    "realtime_overhead_p50_ms",
    "realtime_overhead_p95_ms",
    "realtime_four_final_p95_ms",
    "stream_input_first_audio_ms",
    "stream_concurrent_first_p50_ms",
    "stream_concurrent_first_max_ms",
    "wyoming_first_ratio",
    "wyoming_whole_ratio",
    "wyoming_transcript_ratio",
    "job_rtf_ratio",
    "job_rss_growth_mib",
    "job_first_progress_s",
    "job_live_final_ratio",
    "diarization_der_overlap_free",
    "diarization_count_exact_overlap_free",
    "diarization_rtf_overlap_free",
    "diarization_rss_growth_mib",
    "diarize_time_ratio",
}


def quick_run(results: Path, *selection: str) -> tuple[str, dict[str, Any]]:
    """`python -m bench --quick` with `selection` (--only or --without STEPS): its printout
    and the result it wrote."""
    done = subprocess.run(  # noqa: S603
        # --quick alone allows 600 s; a loaded CI machine needs more.
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--time-limit",
            "900",
            *selection,
            "--results-dir",
            str(results),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=960,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    latest: dict[str, Any] = json.loads((results / "latest.json").read_text())
    stamped = [p for p in results.glob("*.json") if p.name != "latest.json"]
    assert len(stamped) == 1
    assert json.loads(stamped[0].read_text()) == latest
    return done.stdout, latest


def assert_figures(result: dict[str, Any], expected: set[str]) -> None:
    """The run reported exactly `expected`, each a finite number, targeted ones with a verdict."""
    by_key = {figure["key"]: figure for figure in result["figures"]}
    assert set(by_key) == expected
    for key, figure in by_key.items():
        value = figure["value"]
        assert isinstance(value, int | float) and math.isfinite(value), (key, value)
        if key in TARGETED:
            assert isinstance(figure["target"], int | float), key
            assert figure["op"] in (">=", "<=")
            assert isinstance(figure["met"], bool), key
        else:
            assert figure["target"] is None and figure["met"] is None, key


def assert_described(stdout: str, result: dict[str, Any], steps: set[str]) -> None:
    """The run says what machine it ran on, how long `steps` took, and prints its table."""
    assert result["quick"] is True
    machine = result["machine"]
    assert machine["nproc"] >= 1 and machine["cpu_model"]
    took = result["step_seconds"]
    assert steps <= set(took)
    assert all(isinstance(seconds, float) and seconds >= 0 for seconds in took.values())
    assert "| Figure | Value | Before | Target | Met |" in stdout
