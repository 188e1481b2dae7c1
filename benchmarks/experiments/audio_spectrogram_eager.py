"""Audio: WAV decoding on the CPU, spectrograms on the GPU, in decibels."""

import nvidia.dali.experimental.dynamic as ndd
from nvidia.dali import types


def audio_pipe(data_dir, *, batch_size=32):
    """Yields (decibels, labels) batches epoch after epoch, without end, as Pipeline.run() did."""
    reader = ndd.readers.File(file_root=data_dir)
    # capture=True: runs the loop as one prebuilt graph; one such loop can be active at a time
    while True:
        for encoded, labels in reader.next_epoch(batch_size=batch_size):
            audio, rate = ndd.decoders.audio(encoded, dtype=types.FLOAT, downmix=True)
            spectrum = ndd.spectrogram(audio.gpu(), nfft=512, window_length=400, window_step=160)
            decibels = ndd.to_decibels(spectrum, cutoff_db=-80.0)
            yield decibels, labels.gpu()


def run(data_dir, batches, consume):
    ndd.set_num_threads(4)
    pipe = audio_pipe(data_dir)
    for _ in range(batches):
        decibels, labels = next(pipe)
        consume(ndd.as_tensor(decibels), ndd.as_tensor(labels))
