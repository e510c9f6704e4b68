# `cmake --build <dir> --target package`: a Debian package of capsweepd, capsweep and
# capsweep-llmsim with the systemd unit, /etc/capsweep/capsweepd.json (a conffile), a
# `capsweep` system user made by postinst and the state in /var/lib/capsweep.

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME capsweep)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "capsweep maintainers <maintainers@capsweep.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "capacity sweeps of LLM inference endpoints (service, CLI, simulator)")
set(CPACK_PACKAGE_DESCRIPTION
    "capsweepd measures how much load an OpenAI-compatible LLM endpoint takes before its users feel it: stepped request rates, TTFT/TPOT/ITL/E2EL percentiles, goodput and the maximum rate meeting an SLO. capsweep is its command-line client; capsweep-llmsim a simulated LLM server for rehearsals.")
set(CPACK_STRIP_FILES ON)
# Installed with DESTDIR and the prefix /usr, so that /etc/capsweep lands in /etc.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/prerm ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
