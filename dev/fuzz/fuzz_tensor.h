// For the harnesses that read named-tensor files; included after llmc/tensorfile.h.
// A mutated version-2 file nearly always fails its CRC-32 (the last 4 bytes) before any
// reader sees a tensor, so the input is written with the right checksum: the fuzzer then
// reaches the readers behind tf_load. The checksum test itself is one comparison.
#pragma once

static const char *tensor_input_path(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_path(data, size);
    int32_t h[2];
    if (size >= 24 && (memcpy(h, data, 8), h[0] == TF_MAGIC && h[1] == TF_VERSION)) {
        uint32_t crc = crc32_update(0, data, size - 4);
        if (pwrite(fuzz_fd, &crc, 4, (off_t)(size - 4)) != 4) { perror("writing the checksum"); abort(); }
    }
    return path;
}
