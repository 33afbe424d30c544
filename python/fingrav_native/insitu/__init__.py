"""In-situ profiling: per-kernel power and energy inside a running application, from its profiler trace."""
