# gravacd: the wiring of the node daemon (gravacd.{h,cc}: the object graph and its life cycle;
# gravacd_options: its settings; job_session: one job on this node; job_service: --serve_jobs;
# regroup_desk: an elastic job's membership changes)
# and its thin main.cc. Included by daemon/CMakeLists.txt once local/, engine/ and control/ exist.
if(NOT (TARGET gravac_local AND TARGET gravac_engine AND TARGET gravac_control))
  message(STATUS "gravac: gravacd not built (daemon/local, engine or control missing)")
  return()
endif()

add_library(gravac_gravacd ${CMAKE_CURRENT_SOURCE_DIR}/gravacd.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/gravacd_options.cc ${CMAKE_CURRENT_SOURCE_DIR}/job_session.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/job_service.cc ${CMAKE_CURRENT_SOURCE_DIR}/data_ports.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/regroup_desk.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/device_collectives_choice.cc)
target_link_libraries(gravac_gravacd PUBLIC gravac_local gravac_engine gravac_control
  gravac_collectives gravac_transport gravac_daemon_metrics gravac_metrics gravac_core
  absl::synchronization absl::time)
# GravacdBuild(): the version and whether the CUDA kernels are in.
set_property(SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/gravacd_options.cc APPEND PROPERTY
  COMPILE_DEFINITIONS GRAVAC_VERSION="${PROJECT_VERSION}"
  GRAVAC_CUDA_KERNELS=$<BOOL:${GRAVAC_CUDA_ENABLED}>)
gravac_target_warnings(gravac_gravacd)

add_executable(gravacd ${CMAKE_CURRENT_SOURCE_DIR}/main.cc)
target_link_libraries(gravacd PRIVATE gravac_gravacd)
gravac_target_warnings(gravacd)
install(TARGETS gravacd RUNTIME DESTINATION bin)
