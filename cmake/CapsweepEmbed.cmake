# capsweep_embed(<target> NAMESPACE <ns> FUNCTION <fn> FILES <files...>): compiles the files'
# text into <target> as ns::fn(), regenerated whenever a file changes.
function(capsweep_embed target)
  cmake_parse_arguments(E "" "NAMESPACE;FUNCTION" "FILES" ${ARGN})
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${E_FUNCTION}_embedded.cpp")
  string(REPLACE ";" "|" joined "${E_FILES}")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${out}" "-DNAMESPACE=${E_NAMESPACE}" "-DFUNCTION=${E_FUNCTION}"
            "-DFILES=${joined}" -P "${PROJECT_SOURCE_DIR}/cmake/embed.cmake"
    DEPENDS ${E_FILES} "${PROJECT_SOURCE_DIR}/cmake/embed.cmake"
    COMMENT "Embedding ${E_FUNCTION}"
    VERBATIM)
  target_sources(${target} PRIVATE "${out}")
endfunction()
