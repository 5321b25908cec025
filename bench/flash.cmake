# CUDA flash-attention benchmark (bench/run_flash_bench.sh runs it beside PyTorch).
if(WICK_WITH_CUDA)
  add_executable(flash_bench ${CMAKE_CURRENT_LIST_DIR}/flash_bench.cu)
  target_link_libraries(flash_bench PRIVATE wick::wick)
  # The kernel headers it includes are compiled with the library's own CUDA flag.
  target_compile_options(flash_bench PRIVATE --expt-relaxed-constexpr)
endif()
