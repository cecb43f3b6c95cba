# The `cudnn` attention backend: cuDNN's fused attention through the cuDNN frontend (header-only
# C++; scripts/setup.sh installs NVIDIA's PyPI package of it into .venv) and cudnn.h from the
# toolkit or the system. libcudnn.so.9 itself is loaded at run time (attention/cudnn_library.cpp),
# so the binary starts on machines without it and the backend reports why it cannot run.
# RLT_CUDNN: AUTO (build it when both headers are found), ON (require them) or OFF.
set(RLT_CUDNN AUTO CACHE STRING "Build the cudnn attention backend: AUTO, ON or OFF")
set_property(CACHE RLT_CUDNN PROPERTY STRINGS AUTO ON OFF)
set(RLT_HAVE_CUDNN OFF)
if(NOT RLT_CUDNN STREQUAL "OFF")
  file(GLOB _rlt_venv_includes "${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/include")
  find_path(RLT_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${_rlt_venv_includes}
            DOC "Folder holding cudnn_frontend.h (the cuDNN frontend headers)")
  find_path(RLT_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include/x86_64-linux-gnu
            DOC "Folder holding cudnn.h (cuDNN 9)")
  set(_rlt_cudnn_version "")
  if(RLT_CUDNN_INCLUDE_DIR AND EXISTS "${RLT_CUDNN_INCLUDE_DIR}/cudnn_version.h")
    file(STRINGS "${RLT_CUDNN_INCLUDE_DIR}/cudnn_version.h" _rlt_cudnn_lines REGEX "#define CUDNN_(MAJOR|MINOR) ")
    string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*" "\\1" _rlt_cudnn_major "${_rlt_cudnn_lines}")
    string(REGEX REPLACE ".*CUDNN_MINOR ([0-9]+).*" "\\1" _rlt_cudnn_minor "${_rlt_cudnn_lines}")
    set(_rlt_cudnn_version "${_rlt_cudnn_major}.${_rlt_cudnn_minor}")
  endif()
  set(_rlt_frontend_version "")
  if(RLT_CUDNN_FRONTEND_INCLUDE_DIR AND EXISTS "${RLT_CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h")
    file(STRINGS "${RLT_CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h" _rlt_fe_lines
         REGEX "#define CUDNN_FRONTEND_(MAJOR|MINOR)_VERSION ")
    string(REGEX REPLACE ".*MAJOR_VERSION ([0-9]+).*" "\\1" _rlt_fe_major "${_rlt_fe_lines}")
    string(REGEX REPLACE ".*MINOR_VERSION ([0-9]+).*" "\\1" _rlt_fe_minor "${_rlt_fe_lines}")
    set(_rlt_frontend_version "${_rlt_fe_major}.${_rlt_fe_minor}")
  endif()
  # Paged K/V in cuDNN's attention needs the 9.5 headers at least (the run-time library is
  # checked again when the backend starts); the backend is written against frontend 1.32.
  if(_rlt_frontend_version AND _rlt_frontend_version VERSION_GREATER_EQUAL 1.32 AND _rlt_cudnn_version
     AND _rlt_cudnn_version VERSION_GREATER_EQUAL 9.5)
    set(RLT_HAVE_CUDNN ON)
    message(STATUS "rlt: cudnn attention backend on (cuDNN ${_rlt_cudnn_version} headers, frontend "
                   "${_rlt_frontend_version} in ${RLT_CUDNN_FRONTEND_INCLUDE_DIR})")
  elseif(RLT_CUDNN STREQUAL "ON")
    message(FATAL_ERROR "RLT_CUDNN=ON but the cudnn backend cannot be built: it needs cudnn.h of cuDNN 9.5+ "
                        "(found: '${_rlt_cudnn_version}') and the cuDNN frontend 1.32+ headers (found: "
                        "'${_rlt_frontend_version}'; run scripts/setup.sh, or set RLT_CUDNN_FRONTEND_INCLUDE_DIR); "
                        "or configure with -DRLT_CUDNN=OFF")
  else()
    message(STATUS "rlt: cudnn attention backend off (needs cudnn.h of cuDNN 9.5+ and the cuDNN frontend "
                   "1.32+ headers; scripts/setup.sh installs the latter)")
  endif()
endif()
