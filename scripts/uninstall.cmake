# Removes what the last `cmake --install BUILD` put in place, as listed in the build tree's
# install_manifest.txt: run as `cmake --build BUILD --target uninstall`. Folders of sbx's own
# (include/sbx, lib/sbx/plugins, share/sbx, lib/cmake/Sbx, etc/sbx, ...) go when they are left
# empty; shared ones (bin, lib, share/man/man1, ...) stay, even inside a prefix named sbx.
if(NOT EXISTS "${MANIFEST}")
  message(FATAL_ERROR "uninstall: ${MANIFEST} does not exist: nothing was installed from this build tree")
endif()
file(STRINGS "${MANIFEST}" files)
set(dirs)
foreach(f IN LISTS files)
  set(f "$ENV{DESTDIR}${f}")
  if(IS_SYMLINK "${f}" OR EXISTS "${f}")
    message(STATUS "Removing: ${f}")
    file(REMOVE "${f}")
  endif()
  # Its folder is sbx's own when it is, or lies in, a folder named sbx (or Sbx) through
  # folders sbx makes inside those (support, plugins, registry.d).
  get_filename_component(d "${f}" DIRECTORY)
  set(chain)
  get_filename_component(name "${d}" NAME)
  while(name MATCHES "^(support|plugins|registry\\.d)$")
    list(APPEND chain "${d}")
    get_filename_component(d "${d}" DIRECTORY)
    get_filename_component(name "${d}" NAME)
  endwhile()
  if(name MATCHES "^[Ss]bx$")
    list(APPEND dirs ${chain} "${d}")
  endif()
endforeach()
# Such a folder goes when no file is left anywhere beneath it (an empty registry.d the
# install made goes with etc/sbx); the deepest first.
list(REMOVE_DUPLICATES dirs)
list(SORT dirs ORDER DESCENDING)
foreach(d IN LISTS dirs)
  file(GLOB_RECURSE left LIST_DIRECTORIES false "${d}/*")
  if(IS_DIRECTORY "${d}" AND NOT left)
    file(REMOVE_RECURSE "${d}")
  endif()
endforeach()
