# Packaging, included last from the top-level CMakeLists.txt: what
# `cmake --install` adds to the binaries (docs, man pages generated from
# --help at build time, bash completion) and the CPack .deb
# (`cpack -G DEB --config <build>/CPackConfig.cmake`). docs/quickstart.md.

include(GNUInstallDirs)
find_package(Python3 REQUIRED COMPONENTS Interpreter)

set(CTRUN_PACKAGING_DIR ${CMAKE_CURRENT_LIST_DIR})

# Man pages: rendered from each program's --help, so they list exactly the
# flags that build accepts; the .roff beside this file adds EXIT STATUS etc.
set(ctrun_man_summary_ctrun "launch and supervise distributed PyTorch workers (a torchrun replacement)")
set(ctrun_man_summary_ctrund "the ctrun rendezvous daemon")
set(ctrun_man_pages "")
foreach(prog ctrun ctrund)
  set(page ${CMAKE_BINARY_DIR}/man/${prog}.1)
  add_custom_command(OUTPUT ${page}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND Python3::Interpreter ${CTRUN_PACKAGING_DIR}/gen_man.py
            --binary $<TARGET_FILE:${prog}> --name ${prog}
            --summary "${ctrun_man_summary_${prog}}" --version "ctrun ${PROJECT_VERSION}"
            --extra ${CTRUN_PACKAGING_DIR}/${prog}.man-extra.roff --output ${page}
    DEPENDS ${prog} ${CTRUN_PACKAGING_DIR}/gen_man.py ${CTRUN_PACKAGING_DIR}/${prog}.man-extra.roff
    COMMENT "Generating ${prog}.1 from ${prog} --help"
    VERBATIM)
  list(APPEND ctrun_man_pages ${page})
endforeach()
add_custom_target(ctrun_man_pages ALL DEPENDS ${ctrun_man_pages})

install(FILES ${ctrun_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# bash-completion loads completions/<command> on first use: one file, two names.
install(FILES ${CTRUN_PACKAGING_DIR}/ctrun.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME ctrun)
install(FILES ${CTRUN_PACKAGING_DIR}/ctrun.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME ctrund)
# README's links (docs/x.md) stay valid: docs/ keeps its name under the doc dir.
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/ctrun)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/ctrun/docs
        FILES_MATCHING PATTERN "*.md")

# The .deb: /usr/bin/ctrun, /usr/bin/ctrun-full, /usr/bin/ctrund
# and the files above. Depends is computed by dpkg-shlibdeps from the binaries.
# hwloc's library is opened with dlopen, only for --numa-binding
# (launcher/numa/hwloc_loader.h), so dpkg-shlibdeps cannot see it: it is
# recommended (installed by default by apt, not required).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ctrun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "C++ launcher for distributed PyTorch training (a torchrun replacement)")
set(CPACK_PACKAGE_DESCRIPTION
    "ctrun starts and supervises PyTorch worker processes with torchrun's flags, PET_* variables and worker environment. It includes ctrund, a standalone gRPC rendezvous daemon.")
set(CPACK_PACKAGE_CONTACT "ctrun maintainers <ctrun@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3, libhwloc15")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, bash-completion")
include(CPack)
