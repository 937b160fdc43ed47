/* test_tmp.c — temp roots and store urls for the C tests (test_tmp.h). */
#include "test_tmp.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_root[4096];

static int mkdir_p(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  return (mkdir(buf, 0755) != 0 && errno != EEXIST) ? -1 : 0;
}

static void remove_tree(const char *path) {
  DIR *d = opendir(path);
  if (d == NULL) {
    unlink(path);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char child[4096];
    snprintf(child, sizeof child, "%s/%s", path, e->d_name);
    struct stat st;
    if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
      remove_tree(child);
    else
      unlink(child);
  }
  closedir(d);
  rmdir(path);
}

int test_tmp_setup(const char *prefix) {
  const char *base = getenv("MORAINE_TEST_TMP");
  if (base == NULL || base[0] == '\0')
    base = "/tmp";
  if (mkdir_p(base) != 0)
    return -1;
  snprintf(tmp_root, sizeof tmp_root, "%s/%s-XXXXXX", base, prefix);
  return mkdtemp(tmp_root) == NULL ? -1 : 0;
}

void test_tmp_teardown(void) {
  if (tmp_root[0])
    remove_tree(tmp_root);
  tmp_root[0] = '\0';
}

void test_tmp_url(const char *name, char *url, size_t cap) {
  snprintf(url, cap, "file://%s/%s", tmp_root, name);
}
