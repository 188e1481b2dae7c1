"""Audio: WAV decoding on the CPU, spectrograms on the GPU, in decibels."""

from nvidia.dali import fn, pipeline_def, types


@pipeline_def(batch_size=32, num_threads=4, device_id=0)
def audio_pipe(data_dir):
    encoded, labels = fn.readers.file(file_root=data_dir, name="Reader")
    audio, rate = fn.decoders.audio(encoded, dtype=types.FLOAT, downmix=True)
    spectrum = fn.spectrogram(audio.gpu(), nfft=512, window_length=400, window_step=160)
    decibels = fn.to_decibels(spectrum, cutoff_db=-80.0)
    return decibels, labels.gpu()


def run(data_dir, batches, consume):
    pipe = audio_pipe(data_dir)
    pipe.build()
    for _ in range(batches):
        decibels, labels = pipe.run()
        consume(decibels.as_tensor(), labels.as_tensor())
