# CPU flash-attention benchmark (bench/RESULTS.md, "CPU attention").
add_executable(bench_attention_cpu ${CMAKE_CURRENT_LIST_DIR}/bench_attention_cpu.cpp)
target_link_libraries(bench_attention_cpu PRIVATE wick::wick Eigen3::Eigen)
# Forward + backward through the public op, CUDA when present (bench/RESULTS.md, "Attention backward").
add_executable(bench_attention_bwd ${CMAKE_CURRENT_LIST_DIR}/bench_attention_bwd.cpp)
target_link_libraries(bench_attention_bwd PRIVATE wick::wick)
# The public op's per-call time, decode and prefill (bench/RESULTS.md, "Attention op level").
add_executable(bench_attention_op ${CMAKE_CURRENT_LIST_DIR}/bench_attention_op.cpp)
target_link_libraries(bench_attention_op PRIVATE wick::wick)
