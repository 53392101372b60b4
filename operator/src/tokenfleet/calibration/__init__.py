"""The capacity model held against measurements: engine start logs (memory_points), published
benchmarks (perf_data), silicon rows and their harness (silicon*), the MoE kernel fit, and the
textbook formula the model improves on. Tools behind `tokenfleet calibrate` and `plan
--breakdown textbook`; the planner (capacity/) never imports them."""
